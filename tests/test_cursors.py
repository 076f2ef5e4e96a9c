"""Pure unit tests of the sealed cursor codec (no database)."""

from __future__ import annotations

import base64
import dataclasses
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_resources.exceptions import BadPosition, InvalidCursor
from mcp_resources.protocol.cursors import (
    MAX_CURSOR_LENGTH,
    VERSION,
    Binding,
    CursorCodec,
    fingerprint,
    make_cursor,
    read_cursor,
)
from tests.listing_support import INVALID_CURSOR_DATA

KEY = "k" * 32
OLD_KEY = "an-old-cursor-key-0123456789"
NEW_KEY = "a-new-cursor-key-9876543210"
TTL = 900
STARTED = 1_800_000_000
BINDING = Binding(
    method="resources/list",
    prefix="learn://",
    principal=fingerprint("42", "client", "documents:read", "http://testserver/mcp"),
    sources=fingerprint("documents\x00learn://documents/{id}"),
)
B64URL = string.ascii_letters + string.digits + "-_"


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec([KEY])


@pytest.fixture
def token(codec: CursorCodec) -> str:
    return make_cursor(codec, BINDING, ["documents", "2026-01-01T00:00:00|17"], STARTED)


def read(codec: CursorCodec, token: object, binding: Binding = BINDING, now: float = STARTED + 1):
    return read_cursor(codec, token, binding, TTL, now=now)


# Round trip -------------------------------------------------------------------------------------------------


def test_round_trip(codec, token):
    position, started = read(codec, token)
    assert position == ["documents", "2026-01-01T00:00:00|17"]
    assert started == float(STARTED)
    assert isinstance(started, float)


@pytest.mark.parametrize("position", [None, 0, 17, "é/✓", {"phase": 1, "key": [1, "a"]}, [], "x" * 500])
def test_round_trip_of_positions(codec, position):
    assert read(codec, make_cursor(codec, BINDING, position, STARTED))[0] == position


def test_seal_open_round_trip(codec):
    payload = {"v": VERSION, "a": [1, 2], "b": "c"}
    assert codec.open(codec.seal(payload)) == payload


def test_cursor_is_opaque_url_safe_text(codec, token):
    assert set(token) <= set(B64URL)
    assert "documents" not in token
    assert "learn" not in token
    assert "=" not in token


def test_two_cursors_for_the_same_position_differ(codec):
    # A fresh nonce per seal: equal positions are not recognisable from the outside.
    assert make_cursor(codec, BINDING, 1, STARTED) != make_cursor(codec, BINDING, 1, STARTED)


def test_payload_without_the_current_version_is_refused(codec):
    with pytest.raises(InvalidCursor):
        codec.open(codec.seal({"v": VERSION + 1}))
    with pytest.raises(InvalidCursor):
        codec.open(codec.seal({"x": 1}))


# Tampering --------------------------------------------------------------------------------------------------


def test_every_single_character_substitution_is_refused(codec, token):
    for index, original in enumerate(token):
        for replacement in B64URL + "+/=.!é ":
            if replacement == original:
                continue
            tampered = token[:index] + replacement + token[index + 1 :]
            with pytest.raises(InvalidCursor):
                codec.open(tampered)


@settings(max_examples=300)
@given(data=st.data())
def test_tampered_truncated_or_extended_cursors_are_refused(data):
    codec = CursorCodec([KEY])
    position = data.draw(st.text(max_size=40) | st.integers())
    token = make_cursor(codec, BINDING, position, STARTED)
    kind = data.draw(st.sampled_from(["substitute", "truncate", "extend", "delete", "insert", "bitflip"]))
    if kind == "substitute":
        index = data.draw(st.integers(0, len(token) - 1))
        char = data.draw(st.characters().filter(lambda c, i=index: c != token[i]))
        tampered = token[:index] + char + token[index + 1 :]
    elif kind == "truncate":
        tampered = token[: data.draw(st.integers(0, len(token) - 1))]
    elif kind == "extend":
        tampered = token + data.draw(st.text(min_size=1, max_size=8))
    elif kind == "delete":
        index = data.draw(st.integers(0, len(token) - 1))
        tampered = token[:index] + token[index + 1 :]
    elif kind == "insert":
        index = data.draw(st.integers(0, len(token)))
        tampered = token[:index] + data.draw(st.characters()) + token[index:]
    else:
        raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] ^= 1 << data.draw(st.integers(0, 7))
        tampered = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    assert tampered != token
    with pytest.raises(InvalidCursor):
        codec.open(tampered)
    with pytest.raises(InvalidCursor):
        read(codec, tampered)


@pytest.mark.parametrize("suffix", ["=", "==", "===", "\n", " "])
def test_padding_and_whitespace_variants_are_refused(codec, token, suffix):
    with pytest.raises(InvalidCursor):
        codec.open(token + suffix)


def test_standard_base64_alphabet_variant_is_refused(codec):
    # Seal until the token contains a URL-safe character, then write it in the standard alphabet.
    for _ in range(200):
        token = codec.seal({"v": VERSION})
        if "-" in token or "_" in token:
            break
    variant = token.replace("-", "+").replace("_", "/")
    assert variant != token
    with pytest.raises(InvalidCursor):
        codec.open(variant)


@pytest.mark.parametrize("token", ["", "A", "AAAA", "not a cursor", "é" * 10, "A" * 43])
def test_garbage_is_refused(codec, token):
    with pytest.raises(InvalidCursor):
        codec.open(token)


# Keys -------------------------------------------------------------------------------------------------------


def test_cursor_from_another_key_is_refused(token):
    with pytest.raises(InvalidCursor):
        read(CursorCodec(["another-key-of-enough-length"]), token)


def test_cursor_with_the_same_key_id_but_another_key_is_refused(codec, token):
    # Keep our key id, swap the key: authentication still fails.
    other = CursorCodec(["another-key-of-enough-length"])
    other._keys = {next(iter(codec._keys)): next(iter(other._keys.values()))}
    with pytest.raises(InvalidCursor):
        other.open(token)


def test_key_rotation_opens_cursors_sealed_with_an_old_key():
    old_token = make_cursor(CursorCodec([OLD_KEY]), BINDING, "pos", STARTED)
    rotated = CursorCodec([NEW_KEY, OLD_KEY])
    assert read(rotated, old_token)[0] == "pos"
    # New cursors are sealed with the first key only ...
    new_token = make_cursor(rotated, BINDING, "next", STARTED)
    assert read(CursorCodec([NEW_KEY]), new_token)[0] == "next"
    with pytest.raises(InvalidCursor):
        read(CursorCodec([OLD_KEY]), new_token)
    # ... and once the old key is dropped, its cursors are refused.
    with pytest.raises(InvalidCursor):
        read(CursorCodec([NEW_KEY]), old_token)


def test_str_and_bytes_secrets_derive_the_same_key():
    token = CursorCodec([KEY]).seal({"v": VERSION})
    assert CursorCodec([KEY.encode()]).open(token) == {"v": VERSION}


@pytest.mark.parametrize("secret", ["", "short", "x" * 15, b"y" * 15])
def test_short_secrets_are_refused(secret):
    with pytest.raises(ValueError):
        CursorCodec([secret])


def test_sixteen_byte_secret_is_accepted():
    CursorCodec(["x" * 16])


def test_per_process_key_is_shared_within_the_process():
    token = CursorCodec().seal({"v": VERSION, "n": 1})
    assert CursorCodec().open(token) == {"v": VERSION, "n": 1}
    assert CursorCodec(None).open(token) == {"v": VERSION, "n": 1}
    assert CursorCodec([]).open(token) == {"v": VERSION, "n": 1}
    with pytest.raises(InvalidCursor):
        CursorCodec([KEY]).open(token)


def _seal_in_a_new_process() -> str:
    code = (
        "from mcp_resources.protocol.cursors import CursorCodec, VERSION\n"
        "print(CursorCodec().seal({'v': VERSION, 'n': 1}))\n"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_per_process_key_is_random_per_process():
    first, second = _seal_in_a_new_process(), _seal_in_a_new_process()
    # Each process opens nothing sealed by another: the key is random and never written anywhere.
    for token in (first, second):
        with pytest.raises(InvalidCursor):
            CursorCodec().open(token)
    assert first[:6] != second[:6]  # the key ids (first 4 bytes) differ


# Binding ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changed",
    [
        Binding("resources/templates/list", BINDING.prefix, BINDING.principal, BINDING.sources),
        Binding(BINDING.method, "learn://documents/", BINDING.principal, BINDING.sources),
        Binding(BINDING.method, "", BINDING.principal, BINDING.sources),
        Binding(BINDING.method, BINDING.prefix, fingerprint("43", "client", "documents:read", ""), BINDING.sources),
        Binding(BINDING.method, BINDING.prefix, BINDING.principal, fingerprint("notes\x00learn://notes/{id}")),
    ],
    ids=["method", "prefix", "empty-prefix", "principal", "sources"],
)
def test_binding_mismatch_is_refused(codec, token, changed):
    with pytest.raises(InvalidCursor):
        read(codec, token, binding=changed)


def test_binding_matches_only_its_own_payload():
    payload = {"b": BINDING.digest}
    assert BINDING.matches(payload)
    assert not BINDING.matches({})
    assert not BINDING.matches({"b": BINDING.digest + "x"})
    for part in ("method", "prefix", "principal", "sources"):
        # Any part changed (even by moving a character across parts) is another digest.
        assert not dataclasses.replace(BINDING, **{part: getattr(BINDING, part) + "x"}).matches(payload)
    parts = [BINDING.method, BINDING.prefix, BINDING.principal, BINDING.sources]
    assert not Binding(parts[0] + parts[1][:1], parts[1][1:], parts[2], parts[3]).matches(payload)


# Expiry -----------------------------------------------------------------------------------------------------


def test_cursor_is_valid_until_started_plus_ttl(codec, token):
    assert read(codec, token, now=STARTED)[1] == STARTED
    assert read(codec, token, now=STARTED + TTL)[1] == STARTED
    with pytest.raises(InvalidCursor):
        read(codec, token, now=STARTED + TTL + 0.5)
    with pytest.raises(InvalidCursor):
        read(codec, token, now=STARTED + 10 * TTL)


def test_later_pages_do_not_extend_the_traversal(codec, token):
    # The next cursor carries the first page's time, so the traversal still ends at started + ttl.
    position, started = read(codec, token, now=STARTED + TTL - 1)
    following = make_cursor(codec, BINDING, position, started)
    assert read(codec, following, now=STARTED + TTL)[1] == STARTED
    with pytest.raises(InvalidCursor):
        read(codec, following, now=STARTED + TTL + 1)


def test_cursor_started_in_the_future_is_refused(codec, token):
    # A few seconds of clock skew between workers are tolerated; more is not.
    assert read(codec, token, now=STARTED - 5)[1] == STARTED
    with pytest.raises(InvalidCursor):
        read(codec, token, now=STARTED - 6)
    with pytest.raises(InvalidCursor):
        read(codec, token, now=STARTED - 3600)


def test_expiry_uses_the_clock_when_now_is_omitted(codec):
    import time

    fresh = make_cursor(codec, BINDING, 1, time.time())
    assert read_cursor(codec, fresh, BINDING, TTL)[0] == 1
    stale = make_cursor(codec, BINDING, 1, time.time() - TTL - 60)
    with pytest.raises(InvalidCursor):
        read_cursor(codec, stale, BINDING, TTL)


@pytest.mark.parametrize("started", ["1800000000", 1.5e9, True, None, [1]])
def test_non_integer_start_times_are_refused(codec, started):
    payload = {
        "v": VERSION,
        "m": BINDING.method,
        "p": BINDING.prefix,
        "u": BINDING.principal,
        "s": BINDING.sources,
        "t": started,
        "pos": 1,
    }
    with pytest.raises(InvalidCursor):
        read(codec, codec.seal(payload), now=1.5e9)


# Sizes and types --------------------------------------------------------------------------------------------


def test_oversized_tokens_are_refused_before_decoding(codec):
    # An authentic cursor that is too long is still refused: the length is checked first.
    big = make_cursor(codec, BINDING, "x" * MAX_CURSOR_LENGTH, STARTED)
    assert len(big) > MAX_CURSOR_LENGTH
    with pytest.raises(InvalidCursor):
        read(codec, big)
    fits = make_cursor(codec, BINDING, "x" * (MAX_CURSOR_LENGTH // 2), STARTED)
    assert len(fits) <= MAX_CURSOR_LENGTH
    assert read(codec, fits)[0] == "x" * (MAX_CURSOR_LENGTH // 2)


def test_huge_garbage_token_is_refused(codec):
    with pytest.raises(InvalidCursor):
        codec.open("A" * 10_000_000)


@pytest.mark.parametrize("token", [None, 1, 1.5, b"abcd", ["x"], {"c": 1}, True])
def test_non_string_tokens_are_refused(codec, token):
    with pytest.raises(InvalidCursor):
        read(codec, token)


def test_invalid_cursor_says_nothing_about_the_failure(codec, token):
    errors = []
    for bad in ["", token[:-1], token + "A", make_cursor(CursorCodec([OLD_KEY]), BINDING, 1, STARTED)]:
        with pytest.raises(InvalidCursor) as info:
            read(codec, bad)
        errors.append(info.value)
    with pytest.raises(InvalidCursor) as info:
        read(codec, token, now=STARTED + TTL + 1)
    errors.append(info.value)
    # Length, encoding, key and expiry failures are one and the same error: -32602 "Invalid cursor", with the same
    # data (what the client can do: list again), never which check failed.
    assert {type(error) for error in errors} == {InvalidCursor}
    assert {str(error) for error in errors} == {"Invalid cursor"}
    expected = {"code": -32602, "message": "Invalid cursor", "data": INVALID_CURSOR_DATA}
    assert [error.to_error() for error in errors] == [expected] * len(errors)


def test_a_bad_position_is_the_same_invalid_cursor():
    # A cursor that opens but whose position no longer fits the sources says no more than any other refusal.
    error = BadPosition("position does not match the ordering")
    assert error.to_error() == {"code": -32602, "message": "Invalid cursor", "data": INVALID_CURSOR_DATA}
    assert error.reason == "position does not match the ordering"


# Fingerprints -----------------------------------------------------------------------------------------------


def test_fingerprint_is_length_prefixed():
    assert fingerprint("ab", "c") != fingerprint("a", "bc")
    assert fingerprint("a", "") != fingerprint("a")
    assert fingerprint("", "a") != fingerprint("a", "")
    assert fingerprint() != fingerprint("")


def test_fingerprint_is_deterministic_and_short():
    value = fingerprint("42", "client", "documents:read", "aud")
    assert value == fingerprint("42", "client", "documents:read", "aud")
    assert len(value) == 24
    assert set(value) <= set(B64URL)


def test_fingerprint_handles_lone_surrogates():
    assert fingerprint("\ud800") != fingerprint("\ud801")


@given(st.lists(st.text(max_size=5), max_size=4), st.lists(st.text(max_size=5), max_size=4))
def test_distinct_part_lists_have_distinct_fingerprints(a, b):
    if a != b:
        assert fingerprint(*a) != fingerprint(*b)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="AQgw_-+/=Zz09 \n.\u00e9", min_size=1, max_size=14))
def test_token_decoding_accepts_exactly_the_canonical_encoding(token):
    """The cheap checks in ``open`` (alphabet, length, unused bits) are equivalent to re-encoding the bytes."""
    from mcp_resources.protocol.cursors import _decode_token

    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") == token
    except (ValueError, base64.binascii.Error):
        canonical = False
    try:
        assert _decode_token(token) == raw
        accepted = True
    except InvalidCursor:
        accepted = False
    assert accepted == canonical
