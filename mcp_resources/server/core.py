"""The protocol core: a method map serving every protocol version, one handler per method.

The HTTP view, the management commands and the test client all call :meth:`MCPServer.call`, so a command and an
HTTP request can never disagree. Differences between protocol versions (result envelope, cache hints, the
not-found code) are decided here and nowhere else. Exceptions that are not an
:class:`~mcp_resources.exceptions.MCPError` never reach the client: they are logged and answered with a generic
internal error. The core knows nothing of HTTP: sessions reach it as a :class:`SessionSubscriptions`.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from django.core.signals import got_request_exception

from mcp_resources import fastpaths
from mcp_resources.access import PROTECTED, PUBLIC, authorize, may_access
from mcp_resources.caching import MAX_TTL_MS, NO_CACHE, PRIVATE_SCOPE, PUBLIC_SCOPE, CacheHint, combine, default_hint
from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import (
    RESOURCE_NOT_FOUND_2025_11_25,
    AuthenticationRequired,
    DeadlineExceeded,
    InsufficientScope,
    InternalError,
    InvalidCursor,
    InvalidParams,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    ResourceNotFound,
)
from mcp_resources.listing.compiled import declared_access
from mcp_resources.listing.completion import (
    CompletionRequest,
    complete_argument,
    completion_request,
    completion_template,
)
from mcp_resources.listing.pipeline import binding, list_page, open_cursor
from mcp_resources.models import StaticResource
from mcp_resources.ownership import owner_of
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.cursors import CursorCodec, make_cursor
from mcp_resources.protocol.uris import MAX_URI_LENGTH, validate_uri
from mcp_resources.protocol.versions import (
    PREFIX_EXTENSION,
    SERVER_INFO_META,
    SESSION_VERSIONS,
    SUPPORTED_VERSIONS,
    V2026_07_28,
    negotiate_session_version,
)
from mcp_resources.registries import ResourceRegistry
from mcp_resources.registries import registry as default_registry
from mcp_resources.resources import ModelResourceTemplate, ResourceRepository, ResourceTemplate, normalize_contents
from mcp_resources.server.context import CallContext
from mcp_resources.server.static_uris import may_be_static

logger = logging.getLogger("mcp_resources.server")

ALL_VERSIONS = frozenset(SUPPORTED_VERSIONS)
STATELESS_VERSIONS = frozenset({V2026_07_28})
SESSIONS = frozenset(SESSION_VERSIONS)


@dataclass(frozen=True)
class Method:
    """An entry of :attr:`MCPServer.methods`: the handler's attribute name and the protocol versions that have it.

    ``subscriptions``: the method exists only while ``MCP_RESOURCES["SUBSCRIPTIONS"]`` is on.
    """

    handler: str
    versions: frozenset[str] = ALL_VERSIONS
    subscriptions: bool = False


class MCPServer:
    """Dispatches MCP methods against a :class:`~mcp_resources.registries.ResourceRegistry`.

    ``methods`` maps each method name to its handler, ``handler(params, ctx) -> result``. A project adds or
    replaces methods in a subclass::

        class MyServer(MCPServer):
            methods = {**MCPServer.methods, "resources/read": Method("read_resource_audited")}
    """

    methods: ClassVar[dict[str, Method]] = {
        "server/discover": Method("discover", STATELESS_VERSIONS),
        "initialize": Method("initialize", SESSIONS),
        "ping": Method("ping", SESSIONS),
        "resources/list": Method("list_resources"),
        "resources/templates/list": Method("list_templates"),
        "resources/read": Method("read_resource"),
        "resources/subscribe": Method("subscribe", SESSIONS, subscriptions=True),
        "resources/unsubscribe": Method("unsubscribe", SESSIONS, subscriptions=True),
        "subscriptions/listen": Method("prepare_listen", STATELESS_VERSIONS, subscriptions=True),
        "completion/complete": Method("complete"),
    }

    def __init__(self, registry: ResourceRegistry | None = None, codec: CursorCodec | None = None) -> None:
        self.registry = registry or default_registry
        self._codec = codec

    # Entry point -----------------------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Run one request and return its result, or raise an :class:`~mcp_resources.exceptions.MCPError`
        (:class:`AuthenticationRequired` and :class:`InsufficientScope` are answered with HTTP 401 and 403).

        The first call freezes the registry unless it is frozen (a registry the project created itself): a
        configuration that the checks protecting answers refuse raises ``ImproperlyConfigured`` with their messages
        instead of being served."""
        self.registry.ensure_frozen()
        entry = self.methods.get(method)
        if (
            entry is None
            or ctx.protocol_version not in entry.versions
            or (entry.subscriptions and not self.offers_subscriptions(ctx))
        ):
            raise MethodNotFound(f"Method not found: {method}"[:200])
        handler = getattr(self, entry.handler)
        try:
            result: dict[str, Any] = handler(params, ctx)
        except DeadlineExceeded:
            logger.warning("MCP %s ran past its deadline", method)
            raise
        except MCPError:
            raise
        except Exception as exc:
            logger.exception("MCP %s failed", method)
            # As Django's handler does for a view that raises: error trackers (Sentry, Rollbar), and the test
            # client's raise_request_exception, hear of it; the caller still gets only a generic -32603.
            got_request_exception.send(sender=type(self), request=ctx.request)
            raise InternalError() from exc
        if ctx.stateless:
            result.setdefault("resultType", "complete")
            result.setdefault("_meta", {})[SERVER_INFO_META] = mcp_settings.server_info
        return result

    @property
    def codec(self) -> CursorCodec:
        if self._codec is not None:
            return self._codec
        return _codec_for(tuple(mcp_settings.cursor_keys))

    def offers_subscriptions(self, ctx: CallContext) -> bool:
        """``SUBSCRIPTIONS`` is on and the request's transport can deliver notifications (``MCPEndpoint``)."""
        return mcp_settings.subscriptions and ctx.streams

    def capabilities(self, ctx: CallContext) -> dict[str, Any]:
        """Server capabilities: resources and completions; the ``prefix`` list filter is an extension
        (``experimental`` before 2026-07-28).

        ``subscribe`` and ``listChanged`` are announced only where notifications can be delivered.
        """
        extension = {PREFIX_EXTENSION: {"methods": ["resources/list", "resources/templates/list"]}}
        resources: dict[str, Any] = {}
        if self.offers_subscriptions(ctx):
            resources = {"subscribe": True, "listChanged": True}
        capabilities: dict[str, Any] = {"resources": resources, "completions": {}}
        capabilities["extensions" if ctx.stateless else "experimental"] = extension
        return capabilities

    # Lifecycle -------------------------------------------------------------------------------------------

    def discover(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(ctx),
            "ttlMs": mcp_settings.public_cache_ttl_ms,
            "cacheScope": "public",
        }
        if mcp_settings.instructions:
            result["instructions"] = mcp_settings.instructions
        return result

    def initialize(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": negotiate_session_version(params.get("protocolVersion")),
            "capabilities": self.capabilities(ctx),
            "serverInfo": mcp_settings.server_info,
        }
        if mcp_settings.instructions:
            result["instructions"] = mcp_settings.instructions
        return result

    def ping(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return {}

    # Sources ---------------------------------------------------------------------------------------------

    def sources(self) -> list[ResourceTemplate]:
        """Templates that list instances: protected and discoverable ones, in registration order."""
        return [t for t in self.registry.templates if t.lists_instances and t.access != PUBLIC and t.discoverable]

    def inventory_scopes(self) -> list[str]:
        """Every scope the inventory sources require, in order: the challenge for an unauthenticated caller."""
        return list(dict.fromkeys(scope for source in self.sources() for scope in source.scopes))

    def accessible_sources(self, ctx: CallContext) -> list[ResourceTemplate]:
        """Authorize the whole listing: 401 without a caller, 403 when no source is accessible."""
        sources = self.sources()
        if not sources:
            return []
        scopes = self.inventory_scopes()
        if not ctx.principal.authenticated:
            raise AuthenticationRequired(scopes)
        accessible = [s for s in sources if may_access(s.access, s.scopes, ctx.principal)]
        if not accessible:
            raise InsufficientScope(scopes)
        # A source never falls back to an unrestricted query: without a subject, subject-owned sources are skipped.
        return [s for s in accessible if ctx.principal.subject or not getattr(s, "requires_subject", False)]

    # resources/list --------------------------------------------------------------------------------------

    def list_resources(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        prefix = prefix_param(params)
        all_sources = self.sources()
        sources = self.accessible_sources(ctx)
        hints = self.source_hints(ctx, sources) if ctx.stateless else {}
        skeleton: dict[str, Any] = {"resources": []}
        if ctx.stateless:
            # The largest lifetime a page could be given: the byte bound then holds whatever the page's comes to.
            skeleton.update(
                ttlMs=MAX_TTL_MS,
                cacheScope=PRIVATE_SCOPE,
                resultType="complete",
                _meta={SERVER_INFO_META: mcp_settings.server_info},
            )
        page = list_page(
            ctx.request,
            ctx.principal,
            registry=self.registry,
            sources=sources,
            all_sources=all_sources,
            prefix=prefix,
            cursor=params.get("cursor"),
            codec=self.codec,
            cursor_ttl_seconds=mcp_settings.cursor_ttl_seconds,
            limit=mcp_settings.page_size,
            max_bytes=mcp_settings.max_response_bytes,
            # The byte bound covers the whole response: envelope (with the longest id we echo), metadata and cursor.
            base_bytes=len(jsonrpc.dumps_plain({"jsonrpc": "2.0", "id": "x" * 64, "result": skeleton})) + 256,
            deadline=time.monotonic() + mcp_settings.list_deadline_seconds,
        )
        result: dict[str, Any] = {"resources": page.resources}
        if page.next_cursor is not None:
            result["nextCursor"] = page.next_cursor
        if ctx.stateless:
            default_ttl = mcp_settings.public_cache_ttl_ms

            def static_ttl(resource: dict[str, Any]) -> int:
                declared = self.static_hint(resource["uri"])
                return default_ttl if declared is None else declared.ttl_ms

            # Seed 000: a listing that includes a caller's inventory is private with a zero lifetime, every page of
            # it (one that holds only a repository's or static entries as well).
            inventory = any(not isinstance(source, ResourceRepository) for source in sources)
            result["ttlMs"] = 0 if inventory else page.ttl_ms(hints, static_ttl, default_ttl)
            result["cacheScope"] = self.list_scope(ctx, hints, prefix)
        return result

    def source_hints(self, ctx: CallContext, sources: list[ResourceTemplate]) -> dict[str, CacheHint]:
        """The cache hint of each source's listing: a repository's declared one (not cached when it declares none);
        a caller's inventory (a model template, a ``list()`` callback) is private and not cached, whatever its
        template declares (docs/pagination.md, "Cache hints")."""
        hints = {}
        for source in sources:
            declared = source.get_cache_hint(ctx.request) if isinstance(source, ResourceRepository) else None
            hints[source.name] = declared or NO_CACHE
        return hints

    def static_hint(self, uri: str) -> CacheHint | None:
        """The cache hint declared for the static resource ``uri`` (code-registered ones may declare one)."""
        resource = self.registry.get_resource(uri)
        return None if resource is None else resource.get_cache_hint()

    def list_scope(self, ctx: CallContext, hints: dict[str, CacheHint], prefix: str) -> str:
        """The ``cacheScope`` of every page of one listing: private when any of its sources' hints is (a caller's
        inventory always is), or when a static resource the caller may list is protected or declares it; public
        otherwise. Decided from the sources, never from a page's entries: every page of a list has the same scope.
        """
        if any(hint.private for hint in hints.values()):
            return PRIVATE_SCOPE
        principal = ctx.principal
        for resource in self.registry.iter_resources():
            listed = resource.uri.startswith(prefix) and may_access(resource.access, resource.scopes, principal)
            if listed and (resource.get_cache_hint() or default_hint(resource.access)).private:
                return PRIVATE_SCOPE
        if principal.authenticated:
            # Admin rows declare no hint: protected ones make the listing private (asked only when nothing else does).
            protected = StaticResource.objects.filter(enabled=True, access=PROTECTED, uri__startswith=prefix)
            if protected.exists():
                return PRIVATE_SCOPE
        return PUBLIC_SCOPE

    # resources/templates/list ----------------------------------------------------------------------------

    def list_templates(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        prefix = prefix_param(params)
        bound = binding("resources/templates/list", ctx.principal, prefix, self.registry.templates)
        position, started = open_cursor(self.codec, params.get("cursor"), bound, mcp_settings.cursor_ttl_seconds)
        if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 0):
            raise InvalidCursor()
        start = position or 0
        discoverable = [t for t in self.registry.templates if t.discoverable and t.uri_template.startswith(prefix)]
        limit = mcp_settings.page_size
        page = discoverable[start : start + limit]
        result: dict[str, Any] = {"resourceTemplates": [t.get_descriptor() for t in page]}
        if start + limit < len(discoverable):
            result["nextCursor"] = make_cursor(self.codec, bound, start + limit, started)
        if ctx.stateless:
            result.update(self.templates_hint(ctx, discoverable, page).fields())
        return result

    def templates_hint(
        self, ctx: CallContext, discoverable: list[ResourceTemplate], page: list[ResourceTemplate]
    ) -> CacheHint:
        """The hint of a ``resources/templates/list`` page: the templates' declared hints combined (a template
        without one counts as public with ``PUBLIC_CACHE_TTL_MS``), the scope over every page of the listing, the
        lifetime over the templates on this page."""
        default = CacheHint(PUBLIC_SCOPE, mcp_settings.public_cache_ttl_ms)
        declared = {template.name: template.get_cache_hint(ctx.request) for template in discoverable}
        scope = combine((hint for hint in declared.values() if hint is not None), default).scope
        ttl = combine((declared[template.name] or default for template in page), default).ttl_ms
        return CacheHint(scope, ttl)

    # resources/read --------------------------------------------------------------------------------------

    def not_found(self, uri: str, ctx: CallContext) -> ResourceNotFound:
        """The not-found error of the caller's version: ``-32602`` from 2026-07-28, ``-32002`` in sessions."""
        code = None if ctx.stateless else RESOURCE_NOT_FOUND_2025_11_25
        return ResourceNotFound(data={"uri": uri}, code=code)

    def read_resource(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        uri = uri_param(params)
        static, template, variables = self.resolve(uri, ctx)
        if template is None:
            contents, mime_type = static.read(ctx.request), static.mime_type or None
        else:
            try:
                contents = template.read(ctx.request, uri, variables)
            except ResourceNotFound:
                raise self.not_found(uri, ctx) from None
            mime_type = template.mime_type
        result: dict[str, Any] = {"contents": normalize_contents(contents, uri=uri, mime_type=mime_type)}
        if ctx.stateless:
            result.update(self.read_hint(ctx, static, template).fields())
        return result

    def read_hint(self, ctx: CallContext, static: Any, template: ResourceTemplate | None) -> CacheHint:
        """The hint of a read: what the template (or the static resource) declares; without one, not cached, and
        public when anyone may read it."""
        if template is not None:
            return template.get_cache_hint(ctx.request) or default_hint(template.access)
        return static.get_cache_hint() or default_hint(static.access)

    def resolve(self, uri: str, ctx: CallContext) -> tuple[Any, ResourceTemplate | None, Any]:
        """Route ``uri`` to a static resource or a template, and authorize the caller for it.

        Returns ``(static, None, None)`` or ``(None, template, variables)``; raises the not-found error.
        """
        static: Any = self.registry.get_resource(uri)
        if static is None and uri not in ctx.readers and may_be_static(uri, ctx.static_uris):
            # (a batch of callers looked it up once: may_read_each)
            static = StaticResource.objects.filter(uri=uri, enabled=True).first()
        if static is not None:
            authorize(static.access, static.scopes, ctx.principal)
            return static, None, None
        try:
            matched = self.registry.match(uri)
        except ResourceNotFound:
            matched = None  # a parse_uri override refused the URI as not found
        if matched is None:
            raise self.not_found(uri, ctx)
        template, variables = matched
        authorize(template.access, template.scopes, ctx.principal)
        return None, template, variables

    # Subscriptions ---------------------------------------------------------------------------------------

    def check_readable(self, uri: str, ctx: CallContext) -> None:
        """Raise unless the caller may read ``uri`` now: the checks of ``resources/read`` without the contents.

        Static and live resources need only their access policy (``get()`` is not called); a model template whose
        ``fast_paths`` hold ``"object_access"`` fetches the record through the caller's queryset (``get_object``);
        any other template is read. Inside :meth:`may_read_each`, a model template that decides its readers in one
        query answers from that query.
        """
        _static, template, variables = self.resolve(uri, ctx)
        if template is None:
            return
        decided = ctx.readers.get(uri)
        if decided is not None and decided[0] is template:
            if not decided[1]:
                raise self.not_found(uri, ctx)
            return
        try:
            if isinstance(template, ModelResourceTemplate) and fastpaths.OBJECT_ACCESS in template.fast_paths:
                held = self._holds(template, ctx, variables)
                if held is None:
                    template.get_object(ctx.request, variables)  # contents are not needed to decide access
                elif not held:
                    raise ResourceNotFound()
            else:
                template.read(ctx.request, uri, variables)
        except ResourceNotFound:
            raise self.not_found(uri, ctx) from None

    @staticmethod
    def _holds(template: ModelResourceTemplate, ctx: CallContext, variables: Any) -> bool | None:
        """The compiled access check of a template that declares it (``"compiled_access"``): whether the caller's
        records hold the one of ``variables``; ``None`` when ``get_object`` answers."""
        access = declared_access(template)
        if access is None:
            return None
        owner = owner_of(ctx.request)
        return False if owner is None else access.holds(owner, variables)

    def may_read(self, uri: str, ctx: CallContext) -> bool:
        """The access hook: whether the caller may read ``uri`` now (:meth:`check_readable`, as a bool).

        Consulted for a listen stream's acknowledgement, for ``resources/subscribe`` and before every update; a
        subclass overrides it to refuse (or allow) more. An unexpected error is raised: a single caller's check
        logs it and answers no, an update ends the streams it was deciding for.
        """
        try:
            self.check_readable(uri, ctx)
        except MCPError:
            return False
        return True

    def may_read_each(self, uri: str, contexts: list[CallContext]) -> list[bool]:
        """The batch hook: :meth:`may_read` for each of several callers of one changed ``uri``.

        It asks :meth:`may_read` for every caller. When ``uri`` is a record of a model template that decides its
        readers in one query (``owner_field`` with the ``"batched_readers"`` fast path), that query runs first, for
        all of them, and the base :meth:`check_readable` answers from it: an overridden ``may_read`` or
        ``check_readable`` is still asked for each caller, and costs no query of its own when it reaches the base.
        """
        self._decide_readers(uri, contexts)
        try:
            return [bool(self.may_read(uri, ctx)) for ctx in contexts]
        finally:
            for ctx in contexts:
                ctx.readers.pop(uri, None)

    def _decide_readers(self, uri: str, contexts: list[CallContext]) -> None:
        """Record in each context whether its caller's owner reads ``uri`` (:meth:`ModelResourceTemplate.get_readers`),
        when ``uri`` is a record of a template that decides its readers in one query and is no static resource."""
        if len(contexts) < 2 or self.registry.get_resource(uri) is not None:
            return
        try:
            matched = self.registry.match(uri)
        except ResourceNotFound:
            return
        if matched is None:
            return
        template, variables = matched
        if not isinstance(template, ModelResourceTemplate) or not template.decides_readers_in_one_query:
            return
        if (
            may_be_static(uri, contexts[0].static_uris)
            and StaticResource.objects.filter(uri=uri, enabled=True).exists()
        ):
            return
        owners = [owner_of(ctx.request) for ctx in contexts]
        readers = template.get_readers(variables, [owner for owner in owners if owner is not None])
        for ctx, owner in zip(contexts, owners, strict=True):
            ctx.readers[uri] = (template, owner is not None and owner in readers)

    def may_read_logged(self, uri: str, ctx: CallContext) -> bool:
        """:meth:`may_read` for one caller, an unexpected error logged and answered no (a listen's acknowledgement,
        ``resources/subscribe``)."""
        try:
            return bool(self.may_read(uri, ctx))
        except Exception:
            logger.exception("access check for %s failed", uri[:200])
            return False

    def subscribe(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """2025-11-25 ``resources/subscribe``: updates go to the session's GET stream.

        Decided as a listen stream's acknowledgement is, by :meth:`may_read`; a refusal answers
        :meth:`check_readable`'s error when it has one (401, 403), else not found.
        """
        uri = uri_param(params)
        if not self.may_read_logged(uri, ctx):
            self.check_readable(uri, ctx)  # its error (401, 403, not found) when it has one
            raise self.not_found(uri, ctx)
        if ctx.session is None:
            raise InvalidRequest("resources/subscribe needs a session")
        if not ctx.session.subscribe(uri, mcp_settings.uris_per_listen):
            raise InvalidParams(f"A session may subscribe to at most {mcp_settings.uris_per_listen} URIs")
        return {}

    def unsubscribe(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        uri = uri_param(params)
        if ctx.session is None:
            raise InvalidRequest("resources/unsubscribe needs a session")
        ctx.session.unsubscribe(uri)
        return {}

    def prepare_listen(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Validate a ``subscriptions/listen`` filter; return the part the server will honour.

        URIs the caller may not read now (unknown, another user's, out of scope) are left out.
        """
        if not mcp_settings.subscriptions:
            raise MethodNotFound("Method not found: subscriptions/listen")
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("params.notifications must be an object")
        for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if flag in wanted and not isinstance(wanted[flag], bool):
                raise InvalidParams(f"notifications.{flag} must be a boolean")
        honoured: dict[str, Any] = {}
        if wanted.get("resourcesListChanged") is True:
            honoured["resourcesListChanged"] = True
        if "resourceSubscriptions" in wanted:
            uris = wanted["resourceSubscriptions"]
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise InvalidParams("notifications.resourceSubscriptions must be a list of URIs")
            if len(uris) > mcp_settings.uris_per_listen:
                raise InvalidParams(
                    f"notifications.resourceSubscriptions may hold at most {mcp_settings.uris_per_listen} URIs"
                )
            allowed = []
            for uri in dict.fromkeys(uris):
                try:
                    validate_uri(uri)
                except ValueError:
                    continue
                if self.may_read_logged(uri, ctx):
                    allowed.append(uri)
            honoured["resourceSubscriptions"] = allowed
        return honoured

    # completion/complete ---------------------------------------------------------------------------------

    def complete(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Values for a template variable, from what the caller may read (``listing/completion.py``).

        The caller is authorized for the template as for a read (401, 403); an unknown template is ``-32602``.
        """
        wanted = completion_request(params)
        if wanted.uri is None:
            return {"completion": self.complete_prompt(wanted, ctx)}
        template = completion_template(self.registry, wanted.uri)
        authorize(template.access, template.scopes, ctx.principal)
        deadline = time.monotonic() + mcp_settings.list_deadline_seconds
        return {"completion": complete_argument(template, ctx.request, ctx.principal, wanted, deadline)}

    def complete_prompt(self, wanted: CompletionRequest, ctx: CallContext) -> dict[str, Any]:
        """A ``ref/prompt`` completion: this server has no prompts, so every prompt name is unknown (``-32602``).

        A subclass that serves prompts overrides this and returns the ``completion`` object.
        """
        raise InvalidParams("Unknown prompt", data={"name": wanted.prompt})


@functools.lru_cache(maxsize=8)
def _codec_for(keys: tuple[str, ...]) -> CursorCodec:
    """One codec per configured key list (deriving keys costs two hashes and an AES setup each)."""
    return CursorCodec(list(keys)) if keys else CursorCodec()


def uri_param(params: dict[str, Any]) -> str:
    """The ``uri`` parameter, validated; raises ``-32602``."""
    try:
        return validate_uri(params.get("uri"))
    except ValueError as exc:
        raise InvalidParams(f"Invalid resource URI: {exc}") from None


def prefix_param(params: dict[str, Any]) -> str:
    """The optional ``prefix`` extension parameter: a plain string prefix of URIs (or URI templates)."""
    prefix = params.get("prefix", "")
    if prefix is None:
        return ""
    if not isinstance(prefix, str) or len(prefix) > MAX_URI_LENGTH:
        raise InvalidParams(f"prefix must be a string of at most {MAX_URI_LENGTH} characters")
    # No URI holds control characters or lone surrogates (and databases refuse to compare them).
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in prefix):
        raise InvalidParams("prefix must not contain control characters")
    return prefix


default_server = MCPServer()
