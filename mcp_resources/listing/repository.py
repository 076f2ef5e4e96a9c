"""A repository as a listing source: the batches of an external pager, continued with the pager's own token.

A :class:`~mcp_resources.resources.ResourceRepository` answers ``list_page(token=...)`` with resources and the
pager's next token. The traversal's key for each listed entry is a
:class:`~mcp_resources.protocol.cursors.TokenPosition`: after the last entry of a batch, the next token (the next
page asks the pager for the following batch); after any other, the batch's own token, the count of its entries
listed and a digest of the last one's URI. A page cut inside a batch (by the page size, the byte bound, or a batch
longer than the room asked for) therefore resumes by asking for the same batch again and skipping what was listed,
after the entry with that URI when the batch has shifted. The token travels sealed inside the cursor, bound to the
caller, the method, the prefix and the sources like every position.

What the pager returns is checked on every call (a generic error and a log line when it breaks the contract); a
token the pager refuses (:class:`~mcp_resources.exceptions.PageTokenRejected`) answers the client's cursor as
invalid, and any other failure of the pager is a generic internal error, the detail in the
``mcp_resources.listing`` log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp_resources import metadata
from mcp_resources.exceptions import (
    InternalError,
    InvalidCursor,
    MCPError,
    PageTokenRejected,
    SourceContractError,
)
from mcp_resources.listing.plan import NAME_MAX_LENGTH
from mcp_resources.listing.sources import MIME_TYPE_MAX_LENGTH, Entry, Page, reads_back
from mcp_resources.protocol.cursors import MAX_TOKEN_BYTES, TokenPosition, token_bytes, uri_digest
from mcp_resources.protocol.uris import MAX_URI_LENGTH
from mcp_resources.resources import RepositoryPage, ResourceRepository

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("mcp_resources.listing")

REPOSITORY_FIELDS = frozenset({"uri", "name", "title", "description", "mimeType", "size", "annotations", "icons"})
"""What a repository's resource may hold (the MCP ``Resource`` fields but ``_meta``)."""


class RepositorySource:
    """One repository as a listing source (its phase is the template's name)."""

    def __init__(self, template: ResourceRepository) -> None:
        self.template = template
        self.name = template.name

    def page(
        self, request: HttpRequest, *, after: Any, limit: int, prefix: str, deadline: float, seen: set[str]
    ) -> Page:
        position = _position(after)
        token = position.token
        resources, next_token = self._batch(request, token, limit, prefix, deadline)
        template, resolve = self.template, self.template.resolve_uri
        entries: list[Entry] = []
        more_in_batch = False
        # One pass from where the page resumes: each resource checked, dropped outside the prefix, keyed by the
        # position after it; one past the room says whether the batch holds more.
        for index in range(_resume_at(resources, position), len(resources)):
            resource = resources[index]
            entry = None
            if type(resource) is dict and 2 <= len(resource) <= 3:
                # The usual resource (uri, name and maybe mimeType, strings within their limits, the URI in its one
                # spelling), checked inline; anything else, and whatever breaks the contract, by check_resource().
                uri, title, mime = resource.get("uri"), resource.get("name"), resource.get("mimeType", _ABSENT)
                if (
                    type(uri) is str
                    and type(title) is str
                    and 0 < len(uri) <= MAX_URI_LENGTH
                    and 0 < len(title) <= NAME_MAX_LENGTH
                    and (
                        mime is _ABSENT
                        if len(resource) == 2
                        else type(mime) is str and len(mime) <= MIME_TYPE_MAX_LENGTH
                    )
                    and _resolves(resolve, uri)
                ):
                    entry = (
                        {"uri": uri, "name": title}
                        if mime is _ABSENT
                        else {"uri": uri, "name": title, "mimeType": mime}
                    )
            if entry is None:
                entry = check_resource(template, resource)
            uri = entry["uri"]
            if prefix and not uri.startswith(prefix):
                continue
            if len(entries) == limit:
                more_in_batch = True
                break
            if uri in seen:
                raise SourceContractError(f"{self.name}: uri {uri[:200]!r} repeated")
            seen.add(uri)
            entries.append((TokenPosition(token, index + 1, "", uri), entry))
        if next_token is not None:
            if not entries:
                return [(TokenPosition(next_token), {})], True  # nothing listable in this batch: the next one
            if not more_in_batch:
                entries[-1] = (TokenPosition(next_token), entries[-1][1])  # after the batch's last: the next batch
        return entries, more_in_batch or next_token is not None

    def _batch(
        self, request: HttpRequest, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> tuple[Sequence[Any], str | bytes | None]:
        """The pager's batch for ``token`` and its next token (``None`` after the last batch), both checked for their
        shape; each resource is checked as the page reaches it."""
        name = self.name
        try:
            raw = self.template.list_page(request, token=token, limit=limit, prefix=prefix, deadline=deadline)
        except PageTokenRejected as exc:
            if token is None:
                raise SourceContractError(f"{name}: list_page() refused its first batch (no token)") from None
            logger.warning("resources/list: %s refused its page token: %s", name, exc.reason or "no reason given")
            raise InvalidCursor("the repository refused its page token") from None
        except MCPError:
            raise  # the deadline, a cancelled request, or an error the repository means the client to see
        except Exception as exc:
            logger.error("resources/list: the pager of %s failed: %r", name, exc, exc_info=True)
            raise InternalError() from exc
        return check_batch(self.name, raw, token)


def _position(after: Any) -> TokenPosition:
    """The position ``after`` (a traversal key of this page, a cursor's JSON, or ``None``: the first batch)."""
    if after is None:
        return TokenPosition(None)
    if isinstance(after, TokenPosition):
        return after
    return TokenPosition.from_json(after)


def _resume_at(batch: Sequence[Any], position: TokenPosition) -> int:
    """Where to resume in ``batch``: after the ``listed`` entries, or after the entry with the last URI listed when
    the batch has shifted since (entries inserted or removed before it)."""
    listed, last = position.listed, position.digest
    if listed == 0:
        return 0
    if last:
        if listed <= len(batch) and _digest_of(batch[listed - 1]) == last:
            return listed
        for index, resource in enumerate(batch):
            if _digest_of(resource) == last:
                return index + 1
    return min(listed, len(batch))


def _digest_of(resource: Any) -> str | None:
    uri = resource.get("uri") if type(resource) is dict else None
    return uri_digest(uri) if type(uri) is str else None


def check_batch(name: str, raw: Any, token: str | bytes | None) -> tuple[Sequence[Any], str | bytes | None]:
    """The shape of what ``list_page`` returned and its next token; raises :class:`SourceContractError`."""
    if isinstance(raw, RepositoryPage):
        resources, next_token = raw.resources, raw.next_token
    elif isinstance(raw, tuple) and len(raw) == 2:
        resources, next_token = raw
    else:
        raise SourceContractError(f"{name}: list_page() must return (resources, next_token) or a RepositoryPage")
    if not isinstance(resources, Sequence) or isinstance(resources, str | bytes):
        raise SourceContractError(f"{name}: list_page() resources must be a sequence")
    if next_token in ("", b""):
        next_token = None
    if next_token is not None:
        if not isinstance(next_token, str | bytes):
            raise SourceContractError(f"{name}: next_token must be None, a str or bytes")
        size = token_bytes(next_token)
        if size > MAX_TOKEN_BYTES:
            raise SourceContractError(f"{name}: next_token of {size} bytes (at most {MAX_TOKEN_BYTES})")
        if next_token == token:
            raise SourceContractError(f"{name}: next_token is the token it was given: the listing would never end")
    return resources, next_token


def _resolves(resolve: Any, uri: str) -> bool:
    """Whether ``resolve(uri)`` (the template's ``resolve_uri``) accepts ``uri``: what :func:`reads_back` says."""
    try:
        return resolve(uri) is not None
    except Exception:
        return False


_TEXT_FIELDS = (("title", NAME_MAX_LENGTH), ("description", None), ("mimeType", MIME_TYPE_MAX_LENGTH))
_ABSENT: Any = object()


def check_resource(template: ResourceRepository, resource: Any) -> dict[str, Any]:
    """One resource of a batch, checked (``annotations.lastModified`` given as a datetime becomes ISO 8601 text)."""
    name = template.name
    if type(resource) is not dict or not resource.keys() <= REPOSITORY_FIELDS:
        raise SourceContractError(f"{name}: a resource must be a dict of {', '.join(sorted(REPOSITORY_FIELDS))}")
    uri, title = resource.get("uri"), resource.get("name")
    if type(uri) is not str or not uri or len(uri) > MAX_URI_LENGTH:
        raise SourceContractError(f"{name}: uri missing or over {MAX_URI_LENGTH} characters")
    if not reads_back(template, uri):
        raise SourceContractError(
            f"{name}: uri {uri[:200]!r} is not a URI of {template.uri_template} in the one spelling it reads"
        )
    if type(title) is not str or not title or len(title) > NAME_MAX_LENGTH:
        raise SourceContractError(f"{name}: name missing or over {NAME_MAX_LENGTH} characters")
    for text, most in _TEXT_FIELDS:
        value = resource.get(text)
        if value is not None and (not isinstance(value, str) or (most is not None and len(value) > most)):
            limit = f" of at most {most} characters" if most else ""
            raise SourceContractError(f"{name}: {text} of {uri[:200]!r} must be a string{limit}")
    checked = {key: value for key, value in resource.items() if value is not None}
    try:
        if "size" in checked:
            checked["size"] = metadata.check_size(checked["size"])
        if "annotations" in checked:
            annotations = metadata.check_annotations(checked["annotations"])
            checked.pop("annotations")
            if annotations:
                checked["annotations"] = annotations
        if "icons" in checked:
            icons = metadata.check_icons(checked["icons"])
            checked.pop("icons")
            if icons:
                checked["icons"] = icons
    except ValueError as exc:
        raise SourceContractError(f"{name}: {uri[:200]!r}: {exc}") from None
    return checked
