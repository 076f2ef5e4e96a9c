"""Repositories for the tests: sources over an external pager that continues with opaque tokens of its own.

:class:`ScrollPager` behaves like a search API's scroll or an object store's listing: each batch hands out a
fresh random token (bytes the caller cannot interpret, remembered by the pager), refuses tokens it never issued or
has expired, may return more entries than asked for, and lists its entries in an order of its own (not sorted by
any key). Nothing here is mocked: the repository runs through the real server core.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from django.http import HttpRequest

from mcp_resources.exceptions import PageTokenRejected, ResourceError, ResourceNotFound
from mcp_resources.resources import RepositoryPage, ResourceRepository
from tests.listing_support import SCOPE


class TokenExpired(Exception):
    """The pager's own error for a token it does not know (any more)."""


class UpstreamDown(Exception):
    """The pager's own failure (a connection refused, a 500 of the backend), with backend details."""


class ScrollPager:
    """Batches of each owner's entries, continued with random tokens the pager remembers.

    ``items[owner]`` is the owner's list of ``(slug, name)``; ``batch`` the most a batch holds (the ``limit`` the
    repository asks for is honoured only when ``honours_limit``); ``str_tokens`` hands out text tokens instead of
    bytes. ``calls`` records every ``(owner, token, max_results)`` asked for.
    """

    def __init__(
        self,
        items: dict[str, list[tuple[str, str]]] | None = None,
        *,
        batch: int = 3,
        honours_limit: bool = True,
        str_tokens: bool = False,
    ) -> None:
        self.items = items or {}
        self.batch = batch
        self.honours_limit = honours_limit
        self.str_tokens = str_tokens
        self.tokens: dict[str | bytes, tuple[str, int]] = {}
        self.calls: list[tuple[str, Any, int]] = []
        self.down = False

    def expire_all(self) -> None:
        self.tokens.clear()

    def page(self, owner: str, token: str | bytes | None, max_results: int) -> tuple[list[tuple[str, str]], Any]:
        self.calls.append((owner, token, max_results))
        if self.down:
            raise UpstreamDown("connection refused by shelf-backend.internal:9200 (secret-cluster-7)")
        if token is None:
            offset = 0
        else:
            issued = self.tokens.get(token)
            if issued is None or issued[0] != owner:
                raise TokenExpired(f"scroll id {token!r} not found in shelf-backend.internal")
            offset = issued[1]
        rows = self.items.get(owner, [])
        size = min(self.batch, max_results) if self.honours_limit else self.batch
        batch = rows[offset : offset + size]
        if offset + len(batch) >= len(rows):
            return batch, None
        next_token: str | bytes = os.urandom(12)
        if self.str_tokens:
            next_token = next_token.hex()
        self.tokens[next_token] = (owner, offset + len(batch))
        return batch, next_token


SHARED = "shared"
"""The pager key of a shared shelf (``shared = True``): the one shelf every caller lists and reads."""


class Shelf(ResourceRepository):
    """Each caller's shelf, from a :class:`ScrollPager` (subclasses set ``pager``); with ``shared = True``, the one
    shelf of ``pager.items[SHARED]`` for every caller."""

    name = "shelf"
    uri_template = "learn://shelf/{slug}"
    mime_type = "text/plain"
    required_scopes = (SCOPE,)
    pager: ClassVar[ScrollPager] = ScrollPager()
    extra: ClassVar[dict[str, Any]] = {}

    def list_page(
        self, request: HttpRequest, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> Any:
        owner = self.owner(request)
        if not owner:
            return RepositoryPage([])
        try:
            rows, next_token = self.pager.page(owner, token, limit)
        except TokenExpired as exc:
            raise PageTokenRejected(str(exc)) from None
        resources = [{"uri": f"learn://shelf/{slug}", "name": name, **self.extra} for slug, name in rows]
        return RepositoryPage(resources, next_token)

    def owner(self, request: HttpRequest) -> str | None:
        """The pager key the caller lists and reads: its subject, or :data:`SHARED` for a shared shelf."""
        return SHARED if self.shared else request.mcp_principal.subject  # type: ignore[attr-defined]

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        owner = self.owner(request)
        for slug, name in self.pager.items.get(owner or "", []):
            if slug == variables["slug"]:
                return f"{name} on {owner}'s shelf"
        raise ResourceNotFound()


def shelf(pager: ScrollPager, *, name: str = "shelf", **attrs: Any) -> type[Shelf]:
    """A :class:`Shelf` over ``pager`` (and other class attributes), registered under ``name``."""
    return type(
        f"Shelf_{name}", (Shelf,), {"pager": pager, "name": name, "uri_template": f"learn://{name}/{{slug}}", **attrs}
    )


def shelf_uri(slug: str, name: str = "shelf") -> str:
    return f"learn://{name}/{slug}"


class DatedShelf(Shelf):
    """A shelf whose ``parse_uri`` takes over: ``learn://dated/2024-01-05`` parses to a date, a bad date is refused
    with a message for the client (``ResourceError``), and only the canonical spelling reads."""

    name = "dated"
    uri_template = "learn://dated/{day}"

    def parse_uri(self, uri: str) -> Any:
        import datetime

        variables = super().parse_uri(uri)
        if variables is None:
            return None
        try:
            return datetime.date.fromisoformat(variables["day"])
        except ValueError:
            raise ResourceError("The day must be YYYY-MM-DD.") from None

    def list_page(
        self, request: HttpRequest, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> Any:
        days = ["2024-01-05", "2024-01-06", "2024-02-29"]
        return [{"uri": f"learn://dated/{day}", "name": day} for day in days], None

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return f"report of {variables.isoformat()}"
