"""Sealed pagination cursors: AES-256-GCM over a compact JSON payload, bound to the traversal's context.

A cursor binds the method, the prefix, a fingerprint of the caller (subject, client id, scopes, audience), a
fingerprint of the registered sources, the position and the time of the first page. Any failure (length,
encoding, key, tag, binding, expiry) raises the single :class:`InvalidCursor`; callers never learn which check
failed. No Django models are imported here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = 1
MAX_CURSOR_LENGTH = 4096
_KID_LEN = 4
_NONCE_LEN = 12
_TAG_LEN = 16


class InvalidCursor(Exception):
    """The cursor cannot be used: tampered, truncated, foreign, expired or from another traversal."""


@dataclass(frozen=True)
class _Key:
    kid: bytes
    aead: AESGCM


def _derive(secret: str | bytes) -> _Key:
    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    if len(raw) < 16:
        raise ValueError("a cursor key must be at least 16 bytes of secret material")
    key = hashlib.sha256(b"mcp-resources-cursor-key\x00" + raw).digest()
    kid = hashlib.sha256(b"mcp-resources-cursor-kid\x00" + key).digest()[:_KID_LEN]
    return _Key(kid, AESGCM(key))


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
        data = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        nonce = os.urandom(_NONCE_LEN)
        key = self._encrypt_key
        sealed = key.aead.encrypt(nonce, data, _aad(key.kid))
        return base64.urlsafe_b64encode(key.kid + nonce + sealed).rstrip(b"=").decode("ascii")

    def open(self, token: object) -> dict[str, Any]:
        if not isinstance(token, str) or not (0 < len(token) <= MAX_CURSOR_LENGTH):
            raise InvalidCursor()
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursor() from exc
        # The decoder skips foreign characters, accepts '+' and '/' and ignores unused trailing bits: only the
        # canonical encoding is a cursor, so a token cannot be altered and still be accepted.
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
            raise InvalidCursor()
        if len(raw) < _KID_LEN + _NONCE_LEN + _TAG_LEN:
            raise InvalidCursor()
        kid, nonce, sealed = (
            raw[:_KID_LEN],
            raw[_KID_LEN : _KID_LEN + _NONCE_LEN],
            raw[_KID_LEN + _NONCE_LEN :],
        )
        key = self._keys.get(kid)
        if key is None:
            raise InvalidCursor()
        try:
            data = key.aead.decrypt(nonce, sealed, _aad(kid))
            payload = json.loads(data)
        except (InvalidTag, ValueError) as exc:
            raise InvalidCursor() from exc
        if not isinstance(payload, dict) or payload.get("v") != VERSION:
            raise InvalidCursor()
        return payload


def _aad(kid: bytes) -> bytes:
    return b"mcp-resources-cursor/v%d/" % VERSION + kid


def fingerprint(*parts: str) -> str:
    """A short, collision-resistant digest of the given strings (length-prefixed, so parts cannot shift)."""
    h = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8", "surrogatepass")
        h.update(len(encoded).to_bytes(4, "big") + encoded)
    return base64.urlsafe_b64encode(h.digest()[:18]).decode("ascii")


@dataclass(frozen=True)
class Binding:
    """What a traversal's cursors are bound to."""

    method: str
    prefix: str
    principal: str
    sources: str

    def matches(self, payload: dict[str, Any]) -> bool:
        return (
            payload.get("m") == self.method
            and payload.get("p") == self.prefix
            and payload.get("u") == self.principal
            and payload.get("s") == self.sources
        )


def make_cursor(codec: CursorCodec, binding: Binding, position: Any, started: float) -> str:
    """Seal ``position`` for the next page of the traversal that began at ``started`` (epoch seconds)."""
    return codec.seal(
        {
            "v": VERSION,
            "m": binding.method,
            "p": binding.prefix,
            "u": binding.principal,
            "s": binding.sources,
            "t": int(started),
            "pos": position,
        }
    )


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
