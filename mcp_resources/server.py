"""The protocol core: one method table serving both protocol eras.

The HTTP view, the management commands and the test client all call :meth:`MCPServer.call`, so a command and
an HTTP request can never disagree. Era differences (result envelope, cache hints, the not-found code) are
decided here and nowhere else. Application exceptions never reach the client: they are logged and answered
with a generic internal error.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import OperationalError

from mcp_resources import jsonrpc
from mcp_resources.cancellation import RequestCancelled
from mcp_resources.conf import LEGACY_VERSIONS, MODERN_VERSION, SUPPORTED_VERSIONS, mcp_settings
from mcp_resources.cursors import (
    MAX_CURSOR_LENGTH,
    Binding,
    CursorCodec,
    InvalidCursor,
    fingerprint,
    make_cursor,
    read_cursor,
)
from mcp_resources.exceptions import (
    AuthenticationRequired,
    InsufficientScope,
    ResourceError,
    ResourceNotFound,
)
from mcp_resources.inventory import DeadlineExceeded, InventoryError, PositionError, Prefetch, Traversal
from mcp_resources.principal import ANONYMOUS, Principal
from mcp_resources.registry import ResourceRegistry, site
from mcp_resources.resources import PUBLIC, ModelResourceTemplate, ResourceTemplate, normalize_contents
from mcp_resources.uris import MAX_URI_LENGTH, validate_uri

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("mcp_resources.server")

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
PREFIX_EXTENSION = "io.github.django-mcp-resources/prefix"


@dataclass
class CallContext:
    """One request as the core sees it: who calls, in which protocol era."""

    request: HttpRequest
    protocol_version: str = MODERN_VERSION
    principal: Principal = ANONYMOUS
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None

    @property
    def modern(self) -> bool:
        return self.protocol_version == MODERN_VERSION


Handler = Callable[[dict[str, Any], CallContext], dict[str, Any]]


class MCPServer:
    """Dispatches MCP resource methods against a :class:`ResourceRegistry`."""

    def __init__(self, registry: ResourceRegistry | None = None, codec: CursorCodec | None = None) -> None:
        self.registry = registry or site
        self._codec = codec
        self._handlers: dict[str, tuple[Handler, bool, bool]] = {
            # method: (handler, available in 2026-07-28, available in legacy sessions)
            "server/discover": (self.discover, True, False),
            "initialize": (self.initialize, False, True),
            "ping": (self.ping, False, True),
            "resources/list": (self.list_resources, True, True),
            "resources/templates/list": (self.list_templates, True, True),
            "resources/read": (self.read_resource, True, True),
            "resources/subscribe": (self.subscribe, False, True),
            "resources/unsubscribe": (self.unsubscribe, False, True),
        }

    # Entry point -----------------------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Run one request and return its result, or raise an :class:`~mcp_resources.jsonrpc.RPCError`,
        :class:`AuthenticationRequired` or :class:`InsufficientScope`."""
        entry = self._handlers.get(method)
        if method in ("resources/subscribe", "resources/unsubscribe") and not mcp_settings.subscriptions:
            entry = None
        if entry is None or not (entry[1] if ctx.modern else entry[2]):
            raise jsonrpc.MethodNotFound(f"Method not found: {method}"[:200])
        handler = entry[0]
        try:
            result = handler(params, ctx)
        except (jsonrpc.RPCError, AuthenticationRequired, InsufficientScope):
            raise
        except ResourceError as exc:
            raise jsonrpc.RPCError(exc.message) from exc
        except RequestCancelled:
            logger.info("MCP %s cancelled: the client disconnected", method)
            raise jsonrpc.InternalError("Request timed out") from None
        except Exception as exc:
            logger.exception("MCP %s failed", method)
            raise jsonrpc.InternalError() from exc
        if ctx.modern:
            result.setdefault("resultType", "complete")
            meta = result.setdefault("_meta", {})
            meta[SERVER_INFO_META] = mcp_settings.server_info
        return result

    @property
    def codec(self) -> CursorCodec:
        if self._codec is not None:
            return self._codec
        return _codec_for(tuple(mcp_settings.cursor_keys))

    def capabilities(self, modern: bool = True) -> dict[str, Any]:
        """Server capabilities; the ``prefix`` list filter is announced as an extension (experimental in legacy)."""
        extension = {PREFIX_EXTENSION: {"methods": ["resources/list", "resources/templates/list"]}}
        resources: dict[str, Any] = {}
        if mcp_settings.subscriptions:
            resources = {"subscribe": True, "listChanged": True}
        capabilities: dict[str, Any] = {"resources": resources}
        capabilities["extensions" if modern else "experimental"] = extension
        return capabilities

    # Lifecycle -------------------------------------------------------------------------------------------

    def discover(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(modern=True),
            "ttlMs": mcp_settings.discover_ttl_ms,
            "cacheScope": "public",
        }
        if mcp_settings.instructions:
            result["instructions"] = mcp_settings.instructions
        return result

    def initialize(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": negotiate_version(params.get("protocolVersion")),
            "capabilities": self.capabilities(modern=False),
            "serverInfo": mcp_settings.server_info,
        }
        if mcp_settings.instructions:
            result["instructions"] = mcp_settings.instructions
        return result

    def ping(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return {}

    # Access ----------------------------------------------------------------------------------------------

    def authorize(self, access: str, scopes: Iterable[str], ctx: CallContext) -> None:
        """Raise unless the caller may use something with this access policy and these scopes."""
        if access == PUBLIC:
            return
        required = tuple(scopes)
        if not ctx.principal.authenticated:
            raise AuthenticationRequired(required)
        if not ctx.principal.has_scopes(required):
            raise InsufficientScope(required)

    def may_access(self, access: str, scopes: Iterable[str], ctx: CallContext) -> bool:
        try:
            self.authorize(access, scopes, ctx)
        except (AuthenticationRequired, InsufficientScope):
            return False
        return True

    # resources/list --------------------------------------------------------------------------------------

    def _binding(self, method: str, ctx: CallContext, prefix: str = "") -> Binding:
        sources = fingerprint(*(f"{t.name}\x00{t.uri_template}" for t in self.registry.templates))
        # The prefix is bound by its digest: a 2,048-character prefix must not make every cursor too long to reuse.
        return Binding(method, fingerprint(prefix), fingerprint(*ctx.principal.fingerprint_parts()), sources)

    def _open_cursor(self, params: dict[str, Any], binding: Binding) -> tuple[Any, float]:
        if "cursor" not in params or params["cursor"] is None:
            return None, time.time()
        try:
            return read_cursor(self.codec, params["cursor"], binding, mcp_settings.cursor_ttl_seconds)
        except InvalidCursor:
            raise jsonrpc.InvalidParams("Invalid cursor") from None

    def sources(self) -> list[ResourceTemplate]:
        """Templates that list instances: protected and discoverable ones, in registration order."""
        return [t for t in self.registry.templates if t.lists_instances and t.access != PUBLIC and t.discoverable]

    def inventory_scopes(self) -> list[str]:
        """Every scope the inventory sources require, in order: the challenge for an unauthenticated caller."""
        return list(dict.fromkeys(scope for source in self.sources() for scope in source.scopes))

    def _accessible_sources(self, ctx: CallContext) -> list[ResourceTemplate]:
        """Authorize the whole listing: 401 without a caller, 403 when no source is accessible."""
        sources = self.sources()
        if not sources:
            return []
        scopes = self.inventory_scopes()
        if not ctx.principal.authenticated:
            raise AuthenticationRequired(scopes)
        accessible = [s for s in sources if self.may_access(s.access, s.scopes, ctx)]
        if not accessible:
            raise InsufficientScope(scopes)
        # A source never falls back to an unrestricted query: without a subject, subject-owned sources are skipped.
        return [s for s in accessible if ctx.principal.subject or not getattr(s, "requires_subject", False)]

    def list_resources(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        prefix = _prefix_param(params)
        sources = self._accessible_sources(ctx)
        binding = self._binding("resources/list", ctx, prefix)
        position, started = self._open_cursor(params, binding)
        limit = mcp_settings.page_size
        result: dict[str, Any] = {"resources": []}
        has_inventory = bool(self.sources())
        scope, ttl = self._list_cache_hints(ctx, sources, has_inventory)
        # The byte bound covers the whole response: envelope, metadata and the next cursor (counted by the traversal
        # for the position the page actually ends at).
        skeleton_result: dict[str, Any] = dict(result)
        if ctx.modern:
            skeleton_result.update(
                ttlMs=ttl,
                cacheScope=scope,
                resultType="complete",
                _meta={SERVER_INFO_META: mcp_settings.server_info},
            )
        skeleton = {"jsonrpc": "2.0", "id": "x" * 64, "result": skeleton_result}
        cursor_overhead = len(',"nextCursor":""')
        sealed: list[Any] = [None, None]  # the last position sealed for the byte bound, and its cursor

        def cursor_bytes(pos: list[Any]) -> int:
            sealed[:] = [pos, make_cursor(self.codec, binding, pos, started)]
            return cursor_overhead + len(sealed[1])

        traversal = Traversal(
            ctx.request,
            static_page=lambda after, n, pfx, prefetch: self._static_page(
                ctx, after=after, limit=n, prefix=pfx, prefetch=prefetch
            ),
            sources=sources,
            all_sources=self.sources(),
            prefix=prefix,
            limit=limit,
            max_bytes=mcp_settings.max_page_bytes,
            base_bytes=len(jsonrpc.dumps_plain(skeleton)) + 256,
            deadline=time.monotonic() + mcp_settings.list_deadline_seconds,
            cursor_bytes=cursor_bytes,
        )
        try:
            page = traversal.page(position)
        except PositionError:
            raise jsonrpc.InvalidParams("Invalid cursor") from None
        except RequestCancelled:
            # The client has gone (logged by the traversal): fail as the deadline does; nobody reads this answer.
            raise jsonrpc.InternalError("Request timed out") from None
        except DeadlineExceeded:
            logger.warning("resources/list ran past its deadline")
            raise jsonrpc.InternalError("Request timed out") from None
        except InventoryError as exc:
            logger.error("resources/list source broke the list contract: %s", exc)
            raise jsonrpc.InternalError() from None
        except OperationalError:
            logger.exception("resources/list query failed")
            raise jsonrpc.InternalError() from None
        result["resources"] = page.resources
        if page.next_position is not None:
            # The cursor measured for the byte bound is the one to send (sealing it again would only cost time).
            cursor = sealed[1] if sealed[0] == page.next_position else None
            if cursor is None:
                cursor = make_cursor(self.codec, binding, page.next_position, started)
            if len(cursor) > MAX_CURSOR_LENGTH:
                # A cursor that could never be opened again would strand the client: fail now, loudly.
                logger.error("resources/list position too long for a cursor (ordering values too long?)")
                raise jsonrpc.InternalError()
            result["nextCursor"] = cursor
        if ctx.modern:
            result["ttlMs"] = ttl
            result["cacheScope"] = scope
        return result

    def _list_cache_hints(
        self, ctx: CallContext, sources: list[ResourceTemplate], has_inventory: bool
    ) -> tuple[str, int]:
        """Combine the sources' hints: private wins, the smallest ttl applies; inventories are private, ttl 0."""
        if has_inventory:
            return "private", 0
        scope = "private" if ctx.principal.authenticated else "public"
        ttls = [mcp_settings.static_list_ttl_ms]
        for source in sources:
            source_scope, source_ttl = source.cache_control(ctx.request)
            scope = "private" if source_scope == "private" else scope
            ttls.append(max(0, int(source_ttl)))
        return scope, min(ttls)

    def _static_page(
        self, ctx: CallContext, after: str | None, limit: int, prefix: str = "", prefetch: Prefetch | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Static resources (code and admin) the caller may access, in URI byte order, after ``after``.

        ``prefetch`` (a first page's first source) is read in the same round trip as the first batch of admin rows.
        """
        from mcp_resources.models import listing_page

        if after is not None and not isinstance(after, str):
            raise PositionError("static positions are URIs")
        code = {r.uri: r for r in self.registry.iter_resources()}
        entries = [
            (uri, resource.get_descriptor())
            for uri, resource in code.items()
            if (after is None or uri.encode() > after.encode())
            and uri.startswith(prefix)
            and self.may_access(resource.access, resource.scopes, ctx)
        ][:limit]
        # Admin rows, in batches until ``limit`` accessible ones are found (protected rows may be skipped).
        found, position = 0, after
        while found < limit:
            rows = listing_page(position, limit, prefix, prefetch)
            prefetch = None
            for row in rows:
                if row.uri not in code and self.may_access(row.access, row.scopes, ctx):
                    entries.append((row.uri, row.get_descriptor()))
                    found += 1
            if len(rows) < limit:
                break
            position = rows[-1].uri
        entries.sort(key=lambda item: item[0].encode())
        return entries[:limit]

    # resources/templates/list ----------------------------------------------------------------------------

    def list_templates(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        prefix = _prefix_param(params)
        binding = self._binding("resources/templates/list", ctx, prefix)
        position, started = self._open_cursor(params, binding)
        if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 0):
            raise jsonrpc.InvalidParams("Invalid cursor")
        start = position or 0
        discoverable = [t for t in self.registry.templates if t.discoverable and t.uri_template.startswith(prefix)]
        limit = mcp_settings.page_size
        page = discoverable[start : start + limit]
        result: dict[str, Any] = {"resourceTemplates": [t.get_descriptor() for t in page]}
        if start + limit < len(discoverable):
            result["nextCursor"] = make_cursor(self.codec, binding, start + limit, started)
        if ctx.modern:
            result["ttlMs"] = mcp_settings.templates_ttl_ms
            result["cacheScope"] = "public"
        return result

    # resources/read --------------------------------------------------------------------------------------

    def not_found(self, uri: str, ctx: CallContext) -> jsonrpc.RPCError:
        """The era's resource-not-found error: -32602 in 2026-07-28, -32002 in legacy sessions."""
        if ctx.modern:
            return jsonrpc.InvalidParams("Resource not found", data={"uri": uri})
        return jsonrpc.LegacyResourceNotFound("Resource not found", data={"uri": uri})

    def read_resource(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        uri = params.get("uri")
        try:
            uri = validate_uri(uri)
        except ValueError as exc:
            raise jsonrpc.InvalidParams(f"Invalid resource URI: {exc}") from None
        contents, mime_type, scope = self._read(uri, ctx)
        result: dict[str, Any] = {"contents": normalize_contents(contents, uri=uri, mime_type=mime_type)}
        if ctx.modern:
            result["ttlMs"] = 0
            result["cacheScope"] = scope
        return result

    def _resolve(self, uri: str, ctx: CallContext) -> tuple[Any, ResourceTemplate | None, Any]:
        """Route ``uri`` to a static resource or a template and authorize the caller for it."""
        from mcp_resources.models import StaticResource

        static: Any = self.registry.get_resource(uri)
        if static is None:
            static = StaticResource.objects.filter(uri=uri, enabled=True).first()
        if static is not None:
            self.authorize(static.access, static.scopes, ctx)
            return static, None, None
        matched = self.registry.match(uri)
        if matched is None:
            raise self.not_found(uri, ctx)
        template, variables = matched
        self.authorize(template.access, template.scopes, ctx)
        return None, template, variables

    def _read(self, uri: str, ctx: CallContext) -> tuple[Any, str | None, str]:
        static, template, variables = self._resolve(uri, ctx)
        if template is None:
            scope = "public" if static.access == PUBLIC else "private"
            return static.read(ctx.request), static.mime_type or None, scope
        try:
            contents = template.read(ctx.request, uri, variables)
        except ResourceNotFound:
            raise self.not_found(uri, ctx) from None
        return contents, template.mime_type, _template_scope(template)

    # Subscriptions ---------------------------------------------------------------------------------------------

    def check_readable(self, uri: str, ctx: CallContext) -> None:
        """Raise unless the caller may read ``uri`` now: the checks of ``resources/read`` without the contents.

        Static and live resources need only their access policy (``get()`` is not called); a model template
        fetches the record through the caller's queryset; any other template is read.
        """
        _static, template, variables = self._resolve(uri, ctx)
        if template is None:
            return
        try:
            if isinstance(template, ModelResourceTemplate) and type(template).read is ModelResourceTemplate.read:
                template.get_object(ctx.request, variables)  # contents are not needed to decide access
            else:
                template.read(ctx.request, uri, variables)
        except ResourceNotFound:
            raise self.not_found(uri, ctx) from None

    def may_read(self, uri: str, ctx: CallContext) -> bool:
        try:
            self.check_readable(uri, ctx)
        except (jsonrpc.RPCError, AuthenticationRequired, InsufficientScope, ResourceError):
            return False
        except Exception:
            logger.exception("access check for %s failed", uri[:200])
            return False
        return True

    def _subscription_uri(self, params: dict[str, Any], ctx: CallContext) -> str:
        uri = params.get("uri")
        try:
            return validate_uri(uri)
        except ValueError as exc:
            raise jsonrpc.InvalidParams(f"Invalid resource URI: {exc}") from None

    def subscribe(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """2025-11-25 ``resources/subscribe``: updates go to the session's GET stream."""
        from mcp_resources.transport.sessions import add_subscription

        uri = self._subscription_uri(params, ctx)
        self.check_readable(uri, ctx)
        if ctx.session_id is None:
            raise jsonrpc.InvalidRequest("resources/subscribe needs a session")
        if not add_subscription(ctx.session_id, uri, mcp_settings.uris_per_listen):
            raise jsonrpc.InvalidParams(f"A session may subscribe to at most {mcp_settings.uris_per_listen} URIs")
        return {}

    def unsubscribe(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        from mcp_resources.transport.sessions import remove_subscription

        uri = self._subscription_uri(params, ctx)
        if ctx.session_id is None:
            raise jsonrpc.InvalidRequest("resources/unsubscribe needs a session")
        remove_subscription(ctx.session_id, uri)
        return {}

    def prepare_listen(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Validate a ``subscriptions/listen`` filter; return the part the server will honour.

        URIs the caller may not read now (unknown, another user's, out of scope) are left out.
        """
        if not mcp_settings.subscriptions:
            raise jsonrpc.MethodNotFound("Method not found: subscriptions/listen")
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise jsonrpc.InvalidParams("params.notifications must be an object")
        for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if flag in wanted and not isinstance(wanted[flag], bool):
                raise jsonrpc.InvalidParams(f"notifications.{flag} must be a boolean")
        honoured: dict[str, Any] = {}
        if wanted.get("resourcesListChanged") is True:
            honoured["resourcesListChanged"] = True
        if "resourceSubscriptions" in wanted:
            uris = wanted["resourceSubscriptions"]
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise jsonrpc.InvalidParams("notifications.resourceSubscriptions must be a list of URIs")
            if len(uris) > mcp_settings.uris_per_listen:
                raise jsonrpc.InvalidParams(
                    f"notifications.resourceSubscriptions may hold at most {mcp_settings.uris_per_listen} URIs"
                )
            allowed = []
            for uri in dict.fromkeys(uris):
                try:
                    validate_uri(uri)
                except ValueError:
                    continue
                if self.may_read(uri, ctx):
                    allowed.append(uri)
            honoured["resourceSubscriptions"] = allowed
        return honoured


@functools.lru_cache(maxsize=8)
def _codec_for(keys: tuple[str, ...]) -> CursorCodec:
    """One codec per configured key list (deriving keys costs two hashes and an AES setup each)."""
    return CursorCodec(list(keys)) if keys else CursorCodec()


def _prefix_param(params: dict[str, Any]) -> str:
    """The optional ``prefix`` extension parameter: a plain string prefix of URIs (or URI templates)."""
    prefix = params.get("prefix", "")
    if prefix is None:
        return ""
    if not isinstance(prefix, str) or len(prefix) > MAX_URI_LENGTH:
        raise jsonrpc.InvalidParams(f"prefix must be a string of at most {MAX_URI_LENGTH} characters")
    # No URI holds control characters or lone surrogates (and databases refuse to compare them).
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in prefix):
        raise jsonrpc.InvalidParams("prefix must not contain control characters")
    return prefix


def _template_scope(template: ResourceTemplate) -> str:
    return "public" if template.access == PUBLIC else "private"


def negotiate_version(requested: object) -> str:
    """The legacy version answered to ``initialize``: the client's if we speak it, else our newest legacy one."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_VERSIONS[0]


default_server = MCPServer()
