"""Sealed pagination cursors: AES-256-GCM over a compact JSON payload, bound to the traversal's context.

A cursor binds the method, the prefix, a fingerprint of the caller (subject, client id, scopes, audience), a
fingerprint of the registered sources, the position and the time of the first page. Any failure (length,
encoding, key, tag, binding, expiry) raises the single :class:`InvalidCursor`; callers never learn which check
failed. Nothing of Django is imported here but the exception module.

A position is the listing's own JSON value; one kind is defined here, :class:`TokenPosition`, the place in a source
that pages with an opaque continuation token of its own (a repository): the token travels sealed inside the cursor,
so the client can neither read nor alter it, and it is bound like every position.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mcp_resources.exceptions import BadPosition, InvalidCursor

VERSION = 2  # 2: the binding is sealed as one digest
MAX_CURSOR_LENGTH = 4096
MAX_TOKEN_BYTES = 1024
"""The longest continuation token (in bytes; a string counts its UTF-8 bytes) a repository may hand out: sealed in a
cursor with the longest source name and the rest of a position, it stays within :data:`MAX_CURSOR_LENGTH`."""
_KID_LEN = 4
_NONCE_LEN = 12
_TAG_LEN = 16


# Keys are not sorted: the payload is authenticated as a whole, so its byte layout needs no canonical form.
_B64_INDEX = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")}
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _dumps(payload: dict[str, Any]) -> bytes:
    """Compact JSON: orjson, or the standard library for what orjson refuses (an integer past 64 bits). A position
    holds strings, integers, floats and lists of them; a NaN float would be written as ``null``, which no position
    accepts (the cursor is refused, never misread)."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class _Key:
    kid: bytes
    aead: AESGCM
    aad: bytes


def _derive(secret: str | bytes) -> _Key:
    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    if len(raw) < 16:
        raise ValueError("a cursor key must be at least 16 bytes of secret material")
    key = hashlib.sha256(b"mcp-resources-cursor-key\x00" + raw).digest()
    kid = hashlib.sha256(b"mcp-resources-cursor-kid\x00" + key).digest()[:_KID_LEN]
    return _Key(kid, AESGCM(key), _aad(kid))


_process_key: _Key | None = None
_process_lock = threading.Lock()


def process_key() -> _Key:
    """The random per-process key: never written anywhere, gone at shutdown."""
    global _process_key
    with _process_lock:
        if _process_key is None:
            _process_key = _derive(os.urandom(32))
        return _process_key


class CursorCodec:
    """Seal and open payloads. The first key encrypts; every key decrypts (rotation)."""

    def __init__(self, secrets: Sequence[str | bytes] | None = None) -> None:
        keys = [_derive(s) for s in secrets] if secrets else [process_key()]
        self._encrypt_key = keys[0]
        self._keys = {k.kid: k for k in keys}

    def seal(self, payload: dict[str, Any]) -> str:
        nonce = os.urandom(_NONCE_LEN)
        key = self._encrypt_key
        sealed = key.aead.encrypt(nonce, _dumps(payload), key.aad)
        encoded = binascii.b2a_base64(key.kid + nonce + sealed, newline=False)
        return encoded.translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")

    def open(self, token: object) -> dict[str, Any]:
        if not isinstance(token, str) or not (0 < len(token) <= MAX_CURSOR_LENGTH):
            raise InvalidCursor()
        raw = _decode_token(token)
        if len(raw) < _KID_LEN + _NONCE_LEN + _TAG_LEN:
            raise InvalidCursor()
        key = self._keys.get(raw[:_KID_LEN])
        if key is None:
            raise InvalidCursor()
        try:
            data = key.aead.decrypt(raw[_KID_LEN : _KID_LEN + _NONCE_LEN], raw[_KID_LEN + _NONCE_LEN :], key.aad)
            # The standard library's decoder: exact for integers past 64 bits, which orjson reads as floats.
            payload = json.loads(data.decode())
        except (InvalidTag, ValueError) as exc:
            raise InvalidCursor() from exc
        if not isinstance(payload, dict) or payload.get("v") != VERSION:
            raise InvalidCursor()
        return payload


def _decode_token(token: str) -> bytes:
    """The bytes of a canonical unpadded URL-safe base64 token; raise :class:`InvalidCursor` for any other."""
    # Only the canonical encoding is a cursor, so a token cannot be altered and still be accepted: the
    # URL-safe alphabet without padding ('+', '/' and '=' are refused here, any other foreign character by the
    # strict decoder), a length a whole number of bytes can have, and zero unused bits in the last character
    # (which the decoder would ignore). Together these are exactly "re-encoding the bytes gives the token".
    remainder = len(token) % 4
    if remainder == 1 or "+" in token or "/" in token or "=" in token:
        raise InvalidCursor()
    if remainder and _B64_INDEX.get(token[-1], 1) & (0b1111 if remainder == 2 else 0b11):
        raise InvalidCursor()
    try:
        padded = (token + "=" * (-remainder % 4)).encode("ascii")
        raw = binascii.a2b_base64(padded.translate(_FROM_URLSAFE), strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidCursor() from exc
    return raw


def _aad(kid: bytes) -> bytes:
    return b"mcp-resources-cursor/v%d/" % VERSION + kid


@functools.lru_cache(maxsize=1024)
def fingerprint(*parts: str) -> str:
    """A short, collision-resistant digest of the given strings (length-prefixed, so parts cannot shift).

    Memoized: the same parts (a caller's principal, the registered sources, the empty prefix) recur on every page.
    """
    h = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8", "surrogatepass")
        h.update(len(encoded).to_bytes(4, "big") + encoded)
    return base64.urlsafe_b64encode(h.digest()[:18]).decode("ascii")


@dataclass(frozen=True)
class Binding:
    """What a traversal's cursors are bound to (sealed as one digest of the four parts)."""

    method: str
    prefix: str
    principal: str
    sources: str

    @functools.cached_property
    def digest(self) -> str:
        return fingerprint(self.method, self.prefix, self.principal, self.sources)

    def matches(self, payload: dict[str, Any]) -> bool:
        return payload.get("b") == self.digest


def make_cursor(codec: CursorCodec, binding: Binding, position: Any, started: float) -> str:
    """Seal ``position`` for the next page of the traversal that began at ``started`` (epoch seconds)."""
    return codec.seal({"v": VERSION, "b": binding.digest, "t": int(started), "pos": position})


def read_cursor(
    codec: CursorCodec, token: object, binding: Binding, ttl_seconds: int, now: float | None = None
) -> tuple[Any, float]:
    """Open a cursor for ``binding``; return ``(position, started)`` or raise :class:`InvalidCursor`."""
    payload = codec.open(token)
    if not binding.matches(payload):
        raise InvalidCursor()
    started = payload.get("t")
    if not isinstance(started, int) or isinstance(started, bool):
        raise InvalidCursor()
    current = time.time() if now is None else now
    if not (started - 5 <= current <= started + ttl_seconds):
        raise InvalidCursor()
    return payload.get("pos"), float(started)


class TokenPosition:
    """A place in a source that pages with its own opaque token: the batch the pager answers for ``token`` (``None``:
    its first batch), of which the first ``listed`` entries were listed already, the last of them having the URI
    whose :func:`uri_digest` is ``last`` (so that a batch that shifted since can be resumed after that entry).

    ``token`` is any ``str`` or ``bytes`` of at most :data:`MAX_TOKEN_BYTES`, and comes back with its type. A
    position made while listing may carry the URI itself (``last_uri``) instead of its digest: the digest is taken
    only for the position a cursor seals (a page lists up to 100 entries and seals one position).
    """

    __slots__ = ("last", "last_uri", "listed", "token")

    def __init__(self, token: str | bytes | None, listed: int = 0, last: str = "", last_uri: str | None = None) -> None:
        # A plain class, not a dataclass: a page makes one for each listed entry, and this costs a third as much.
        self.token = token
        self.listed = listed
        self.last = last
        self.last_uri = last_uri

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenPosition):
            return NotImplemented
        return (self.token, self.listed, self.digest) == (other.token, other.listed, other.digest)

    def __hash__(self) -> int:
        return hash((self.token, self.listed, self.digest))

    def __repr__(self) -> str:
        return f"TokenPosition({self.token!r}, listed={self.listed}, last={self.digest!r})"

    @property
    def digest(self) -> str:
        """The digest of the last listed URI (``""`` at the start of a batch)."""
        return uri_digest(self.last_uri) if self.last_uri is not None else self.last

    def to_json(self) -> dict[str, Any]:
        """The position as a cursor holds it: the token (bytes as URL-safe base64), its type, the count, the digest."""
        token = self.token
        if isinstance(token, bytes):
            return {"tb": base64.urlsafe_b64encode(token).decode("ascii"), "n": self.listed, "u": self.digest}
        return {"ts": token, "n": self.listed, "u": self.digest}

    @classmethod
    def from_json(cls, raw: Any) -> TokenPosition:
        """The position a cursor held; raises :class:`BadPosition` for anything :meth:`to_json` does not write."""
        if not isinstance(raw, dict) or set(raw) not in ({"tb", "n", "u"}, {"ts", "n", "u"}):
            raise BadPosition("not a token position")
        listed, last = raw["n"], raw["u"]
        if not isinstance(listed, int) or isinstance(listed, bool) or listed < 0 or not isinstance(last, str):
            raise BadPosition("bad token position")
        token: str | bytes | None
        if "tb" in raw:
            if not isinstance(raw["tb"], str):
                raise BadPosition("bad token")
            try:
                token = base64.urlsafe_b64decode(raw["tb"].encode("ascii"))
            except (binascii.Error, ValueError) as exc:
                raise BadPosition("bad token") from exc
        else:
            token = raw["ts"]
            if token is not None and not isinstance(token, str):
                raise BadPosition("bad token")
        if token is not None and token_bytes(token) > MAX_TOKEN_BYTES:
            raise BadPosition("token too long")
        return cls(token, listed, last)


def uri_digest(uri: str) -> str:
    """A short digest of a listed URI, for a :class:`TokenPosition` (not memoized: URIs do not recur like bindings)."""
    digest = hashlib.sha256(uri.encode("utf-8", "surrogatepass")).digest()[:12]
    return base64.urlsafe_b64encode(digest).decode("ascii")


def token_bytes(token: str | bytes) -> int:
    """The size of a continuation token, as :data:`MAX_TOKEN_BYTES` counts it."""
    return len(token) if isinstance(token, bytes) else len(token.encode("utf-8", "surrogatepass"))
