"""The verified identity a request carries: what generic callbacks see of the caller."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Principal:
    """Who is calling, as established by the authentication class.

    ``subject`` is the stable user id (``None`` for anonymous callers and client-credentials tokens),
    ``client_id`` the OAuth application, ``scopes`` the validated scopes and ``audience`` the resource URIs the
    token was issued for. Nothing else from the token is exposed.
    """

    subject: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)
    audience: tuple[str, ...] = ()
    authenticated: bool = False
    expires_at: float | None = field(default=None, compare=False)

    @classmethod
    def anonymous(cls) -> Principal:
        return cls()

    def has_scopes(self, required: tuple[str, ...] | list[str]) -> bool:
        return set(required) <= self.scopes

    def fingerprint_parts(self) -> tuple[str, str, str, str]:
        return (
            self.subject or "",
            self.client_id or "",
            " ".join(sorted(self.scopes)),
            " ".join(sorted(self.audience)),
        )


ANONYMOUS = Principal.anonymous()
