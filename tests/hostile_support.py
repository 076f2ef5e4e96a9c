"""Hostile input for the endpoint: hypothesis strategies, and the rule every answer must keep.

The rule (:func:`check_answer`): whatever arrives, the answer is a JSON-RPC error or result, or one of the
documented HTTP answers (202 and 204 empty, 405 with ``Allow``, a 401 or 403 OAuth challenge, Django's 400 page for
a ``Host`` not allowed: docs/protocol.md, "Errors"), with a status that fits its code. Never a 5xx, never
``-32603`` (hostile input is not an internal error: an unexpected exception the endpoint caught still answers
``-32603``, and counts as a defect here), never a traceback or a backend detail that the request did not carry
itself, never a record of another user, never an id other than the one sent.

The strategies build what an attacker sends: bytes, JSON with duplicate and case-variant keys, lone surrogates,
invalid UTF-8, ``NaN``, huge numbers, deep nesting, batches and scalars; JSON-RPC messages of every method with
mutated ``_meta``, ids of every type, URIs (long, percent-encoded, Unicode, traversal, other schemes) and cursors
(random, mutated real ones, oversized, another user's or another method's); and the headers around them
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Session-Id``, ``Content-Type``, ``Content-Length``
lies, ``Origin``, ``Host``, ``Authorization``).

Budgets: every property takes ``examples(n)`` examples, ``n`` times ``MCP_HOSTILE_SCALE`` (default 1; a nightly
run can set 50).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
STATELESS = "2026-07-28"
SESSION = "2025-11-25"

# Budgets -----------------------------------------------------------------------------------------------------


def examples(n: int) -> int:
    """``n`` examples, scaled by ``MCP_HOSTILE_SCALE``."""
    return max(1, round(n * float(os.environ.get("MCP_HOSTILE_SCALE", "1"))))


def budget(n: int) -> Any:
    """Hypothesis settings for one property: ``examples(n)`` examples, no deadline (the machine is shared)."""
    return settings(
        max_examples=examples(n),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# The rule ----------------------------------------------------------------------------------------------------

DOCUMENTED_STATUSES = {200, 202, 204, 400, 401, 403, 404, 405, 413, 429}
# The statuses each JSON-RPC error code may come with (2026-07-28 statuses; sessions answer errors with 200).
CODE_STATUSES = {
    -32700: {400},
    -32600: {400, 403, 404, 413, 429},
    -32601: {404, 200},
    -32602: {400, 200},
    -32002: {200},
    -32020: {400},
    -32022: {400},
}
# What a client must never see unless it sent it: tracebacks, exception names, paths, SQL, the database drivers.
LEAK_MARKERS = [
    b"Traceback",
    b'File "',
    b"site-packages",
    b'.py"',
    b"psycopg",
    b"sqlite",
    b"SQLite",
    b"PostgreSQL",
    b"OperationalError",
    b"ProgrammingError",
    b"IntegrityError",
    b"DataError",
    b"DatabaseError",
    b"django.",
    b"SELECT ",
    b" object at 0x",
    b"KeyError",
    b"TypeError",
    b"ValueError",
    b"AttributeError",
    b"RecursionError",
    b"UnicodeDecodeError",
    b"UnicodeEncodeError",
]
OWNER_MARKERS = {"alice": b"ALICE-PRIVATE", "bob": b"BOB-PRIVATE"}
"""Every record of the two users holds its owner's marker in its title and its text."""


@dataclass
class Answer:
    """One HTTP answer: status, headers (names in lower case) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)


def valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


UNKNOWN: Any = object()
"""``sent_id`` when the test does not know which id the server read."""


def check_answer(
    answer: Answer, request: bytes, *, caller: str | None, sent_id: Any = UNKNOWN, method: str = "POST"
) -> None:
    """Fail unless ``answer`` keeps the rule (see the module's docstring).

    ``method`` is the request's HTTP method (the answer to ``HEAD`` has no body); ``request`` everything the
    client sent (for the leak check: an echoed marker is the client's own); ``caller`` whose token authenticated
    it (``None``: anonymous or an invalid token); ``sent_id`` the id of the request as the server reads it
    (``None``: no id, or JSON ``null``), when the test knows it.
    """
    context = f"{answer.status} {answer.headers} {answer.body[:600]!r}"
    assert answer.status < 500, f"5xx: {context}"
    assert answer.status in DOCUMENTED_STATUSES, f"undocumented status: {context}"
    for marker in LEAK_MARKERS:
        assert marker not in answer.body or marker in request, f"backend detail {marker!r} in the answer: {context}"
    for owner, marker in OWNER_MARKERS.items():
        if owner != caller:
            reached = caller or "an anonymous caller"
            assert marker not in answer.body, f"a record of {owner} reached {reached}: {context}"
    if method == "HEAD":
        assert answer.body == b"", context
        return
    if answer.status in (202, 204):
        assert answer.body == b"", f"{answer.status} with a body: {context}"
        return
    if answer.status == 405:
        assert answer.body == b"", context
        assert "allow" in answer.headers, context
        return
    if answer.status in (401, 403) and "www-authenticate" in answer.headers:
        assert answer.headers["www-authenticate"].startswith("Bearer"), context
        assert answer.content_type == "application/json", context
        assert isinstance(answer.json().get("error"), str), context
        return
    if answer.status == 400 and answer.content_type == "text/html":
        # A middleware that validates Host (CommonMiddleware) answers a disallowed Host with Django's 400 page.
        assert b"Bad Request" in answer.body, context
        return
    assert answer.content_type == "application/json", f"not JSON: {context}"
    payload = answer.json()
    assert isinstance(payload, dict), context
    assert payload.get("jsonrpc") == "2.0", context
    assert "id" in payload, context
    if sent_id is not UNKNOWN:
        expected = sent_id if valid_id(sent_id) else None
        assert payload["id"] in (expected, None), f"answered id {payload['id']!r} to id {sent_id!r}: {context}"
    if "result" in payload:
        assert answer.status == 200, context
        assert "error" not in payload, context
        assert isinstance(payload["result"], dict), context
        return
    error = payload.get("error")
    assert isinstance(error, dict), context
    code = error.get("code")
    assert isinstance(code, int), context
    assert isinstance(error.get("message"), str), context
    assert error["message"], context
    assert code != -32603, f"an internal error (a defect: see the log): {context}"
    assert code in CODE_STATUSES, f"undocumented code {code}: {context}"
    assert answer.status in CODE_STATUSES[code], f"status {answer.status} for code {code}: {context}"


class ErrorLog(logging.Handler):
    """Collects the records at ERROR and above of the app's and Django's request loggers."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def check(self) -> None:
        """Fail on any record collected so far (and forget them)."""
        records, self.records = self.records, []
        assert not records, "logged: " + "\n".join(
            f"{r.name}: {r.getMessage()}" + (f" ({r.exc_info[1]!r})" if r.exc_info else "") for r in records
        )


@contextmanager
def error_log() -> Iterator[ErrorLog]:
    """An :class:`ErrorLog` on ``mcp_resources`` and ``django.request`` for the duration of the block."""
    handler = ErrorLog()
    loggers = [logging.getLogger(name) for name in ("mcp_resources", "django.request")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


# JSON, rendered by hand: duplicate keys, NaN, raw number literals, invalid UTF-8 ---------------------------------


class Raw(str):
    """A JSON token written as is (a number literal such as ``1e999`` or a 5,000-digit integer)."""


@dataclass(frozen=True)
class Pairs:
    """A JSON object as a list of members: keys may repeat."""

    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Deep:
    """``depth`` nested arrays (or objects ``{"a": ...}``) around ``null``, rendered without recursion."""

    depth: int
    kind: str = "list"

    def render(self) -> str:
        if self.kind == "list":
            return "[" * self.depth + "null" + "]" * self.depth
        return '{"a":' * self.depth + "null" + "}" * self.depth


def render(value: Any, *, ascii_only: bool) -> str:
    """JSON text of ``value`` (:class:`Raw`, :class:`Pairs` and :class:`Deep` included; ``NaN`` and ``Infinity``
    as literals)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Deep):
        return value.render()
    if isinstance(value, Pairs):
        members = (render(k, ascii_only=ascii_only) + ":" + render(v, ascii_only=ascii_only) for k, v in value.items)
        return "{" + ",".join(members) + "}"
    if isinstance(value, dict):
        return render(Pairs(tuple(value.items())), ascii_only=ascii_only)
    if isinstance(value, list):
        return "[" + ",".join(render(v, ascii_only=ascii_only) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value, ensure_ascii=ascii_only)


def encode(value: Any, *, ascii_only: bool = True) -> bytes:
    """The body of ``value``; without ``ascii_only``, lone surrogates become bytes that are not UTF-8."""
    return render(value, ascii_only=ascii_only).encode("utf-8", "surrogatepass")


any_char = st.characters(exclude_categories=())  # every code point, lone surrogates included
texts = st.text(any_char, max_size=20)
number_literals = st.sampled_from(
    [
        "1e999",
        "-1e999",
        "1" * 5000,
        "-" + "9" * 4301,
        "1.0",
        "-0",
        "1E400",
        "0.1e-999999",
        "123456789012345678901234567890",
        "18446744073709551616",
        "-9223372036854775809",
        "01",
        "1.",
        ".5",
        "0x10",
        "+1",
    ]
).map(Raw)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    number_literals,
)
strict_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), texts),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)),
    max_leaves=8,
)
"""JSON values that parse (lone surrogates as escapes included): hostile values, inside a well-formed message."""
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(texts, children, max_size=4),
        st.lists(st.tuples(texts, children), max_size=4).map(lambda items: Pairs(tuple(items))),
    ),
    max_leaves=12,
)


depths = st.one_of(st.integers(1, 50), st.integers(900, 1100), st.integers(5000, 60000))
deep_values = st.builds(Deep, depths, st.sampled_from(["list", "dict"]))


# JSON-RPC messages ---------------------------------------------------------------------------------------------

KNOWN_METHODS = [
    "server/discover",
    "initialize",
    "ping",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "tools/call",
    "prompts/get",
    "logging/setLevel",
]
methods = st.one_of(
    st.sampled_from(KNOWN_METHODS),
    st.sampled_from(["Resources/List", "RESOURCES/READ", "resources/list ", " resources/read", "resources//list", ""]),
    texts,
)
ids = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    texts,
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(texts, st.integers(), max_size=2),
    number_literals,
)
VERSIONS = [STATELESS, SESSION, "2025-06-18", "2025-03-26", "2024-11-05", "2026-07-29", "", "2026-07-28 ", "2026-7-28"]
versions = st.one_of(st.sampled_from(VERSIONS), texts, strict_values)
case_variants = st.sampled_from(["Method", "METHOD", "Params", "PARAMS", "ID", "Id", "JSONRPC", "Jsonrpc", "method "])


def meta_objects(version: Any = STATELESS) -> st.SearchStrategy[Any]:
    """A request's ``_meta``: valid, or missing keys, wrong types, other versions, deep capabilities, extras."""
    valid = {PROTOCOL_VERSION_META: version, CLIENT_CAPABILITIES_META: {}}
    mutated = st.fixed_dictionaries(
        {},
        optional={
            PROTOCOL_VERSION_META: st.one_of(st.just(version), versions),
            CLIENT_CAPABILITIES_META: st.one_of(st.just({}), strict_values, deep_values),
            "io.modelcontextprotocol/clientInfo": strict_values,
            "io.modelcontextprotocol/logLevel": strict_values,
            "progressToken": strict_values,
            "traceparent": strict_values,
        },
    )
    return st.one_of(st.just(valid), st.just(valid), st.just(valid), mutated, strict_values)


@dataclass
class Message:
    """A generated request: its body's members (keys may repeat) and what the test knows of it."""

    members: list[tuple[str, Any]]
    method: Any
    params: Any
    id: Any
    has_id: bool

    def body(self, *, ascii_only: bool = True) -> bytes:
        return encode(Pairs(tuple(self.members)), ascii_only=ascii_only)

    @property
    def sent_id(self) -> Any:
        """The id the server reads: the one ``id`` member's value as parsed; ``None`` for none, several or a
        literal that does not parse (the whole body is then a parse error, answered with id ``null``)."""
        found = [value for key, value in self.members if key == "id"]
        if len(found) != 1:
            return None
        value = found[0]
        if isinstance(value, Raw):
            try:
                return json.loads(value)
            except ValueError:
                return None
        return value


DEFECTS = ["member", "params", "no-params", "id", "no-id", "method", "no-method", "jsonrpc", "no-jsonrpc"]
"""What :func:`messages` may get wrong in one message (none, one, or a few at once)."""
RESOURCE_METHODS = ["resources/list", "resources/templates/list", "resources/read"]
likely_methods = st.one_of(st.sampled_from(RESOURCE_METHODS), methods)


@st.composite
def messages(
    draw: st.DrawFn,
    params_for: Callable[[Any], st.SearchStrategy[Any]] | None = None,
    method_strategy: st.SearchStrategy[Any] | None = None,
) -> Message:
    """A JSON-RPC message with no, one or a few defects (so that most reach the methods, where their params are
    hostile); ``params_for`` gives the strategy of a method's params (default: ``_meta`` only)."""
    defects = {defect for defect in DEFECTS if draw(st.integers(0, 15)) == 0}
    members: list[tuple[str, Any]] = []
    if "no-jsonrpc" not in defects:
        members.append(("jsonrpc", draw(json_values) if "jsonrpc" in defects else "2.0"))
    request_id = draw(ids if "id" in defects else st.one_of(st.integers(0, 2**31), texts))
    if "no-id" not in defects:
        members.append(("id", request_id))
    if "method" in defects:
        method = draw(st.one_of(methods, json_values))
    else:
        method = draw(likely_methods if method_strategy is None else method_strategy)
    if "no-method" not in defects:
        members.append(("method", method))
    if "params" in defects:
        params = draw(json_values)
    else:
        default = st.fixed_dictionaries({"_meta": meta_objects()})
        params = draw(params_for(method) if params_for is not None else default)
    if "no-params" not in defects:
        members.append(("params", params))
    if "member" in defects:
        # Case variants, duplicates, responses' members, unknown members.
        key = draw(st.one_of(case_variants, st.sampled_from(["id", "method", "jsonrpc", "result", "error"]), texts))
        members.insert(draw(st.integers(0, len(members))), (key, draw(json_values)))
    return Message(members, method, params, request_id, "no-id" not in defects)


# URIs ----------------------------------------------------------------------------------------------------------

# Arabic-Indic, fullwidth and Devanagari digits: int() reads each as 0-9.
UNICODE_DIGITS = ["".join(chr(base + d) for d in range(10)) for base in (0x0660, 0xFF10, 0x0966)]
# Values that are not a record's id: out of the database's integer range, signed, spelled as floats or hex.
NUMBERISH = ["99999999999999999999", "9223372036854775808", "-9223372036854775809", "1" * 400, "-1", "0", "1e5"]
NUMBERISH += ["1.0", "0x1", "NaN", "inf", "+1", "%31", " 1", "1 "]
SCHEMES = ["learn", "LEARN", "Learn", "file", "http", "https", "data", "javascript", "urn", "", "learn:", "ftp"]


def percent_encode_some(text: str, which: list[bool]) -> str:
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) if flag else ch
        for ch, flag in zip(text, which + [False] * len(text), strict=False)
    )


@st.composite
def uris(draw: st.DrawFn, known: list[str]) -> Any:
    """A URI to read, subscribe or listen to: a real record's (``known``) mutated, another scheme's, or garbage."""
    choice = draw(st.integers(0, 9))
    if choice <= 3 and known:
        uri = draw(st.sampled_from(known))
        head, _, tail = uri.rpartition("/")
        mutation = max(0, draw(st.integers(-3, 11)))
        if mutation == 0:
            return uri
        if mutation == 1:
            return f"{head}/{'0' * draw(st.integers(1, 5))}{tail}"
        if mutation == 2:
            return percent_encode_some(uri, draw(st.lists(st.booleans(), max_size=len(uri))))
        if mutation == 3:
            digits = draw(st.sampled_from(UNICODE_DIGITS))
            return head + "/" + "".join(digits[int(d)] if d.isdigit() else d for d in tail)
        if mutation == 4:
            return head + "/" + draw(st.sampled_from(["+", "-", " ", "\t", "_", "\u00a0"])) + tail
        if mutation == 5:
            return head + "/" + tail[:1] + "_" + tail[1:] + draw(st.sampled_from(["", "0", "_0"]))
        if mutation == 6:
            return uri + draw(st.sampled_from(["/", "?", "#", "?x=1", "#frag", "/..", "/.", "%00", "\x00", "%2F"]))
        if mutation == 7:
            return head + draw(st.sampled_from(["/../", "/./", "//", "/%2e%2e/", "/..%2f", "\\"])) + tail
        if mutation == 8:
            return uri.upper() if draw(st.booleans()) else uri.replace("learn", "LEARN", 1)
        if mutation == 9:
            return uri + "x" * draw(st.integers(1, 3000))
        if mutation == 10:
            return head + "/" + draw(st.one_of(texts, st.sampled_from(NUMBERISH)))
        return head + "/" + tail + draw(any_char)
    if choice <= 5:
        scheme = draw(st.sampled_from(SCHEMES))
        path = draw(
            st.one_of(
                st.sampled_from(["///etc/passwd", "//127.0.0.1:5432/", "//documents/1", "text/plain,hi", "alert(1)"]),
                texts,
                st.text(any_char, min_size=2040, max_size=2060),
            )
        )
        return f"{scheme}:{path}"
    if choice <= 7:
        return draw(st.one_of(texts, st.text(st.characters(max_codepoint=0x7F), max_size=80)))
    if choice == 8:
        return draw(st.text(st.sampled_from("learn:/documents0123456789%._~-"), min_size=2040, max_size=2100))
    return draw(strict_values)


# Cursors -------------------------------------------------------------------------------------------------------


@st.composite
def cursors(draw: st.DrawFn, real: list[str]) -> Any:
    """A cursor: a real one (the caller's, another user's, another method's) as is or mutated, or garbage."""
    choice = draw(st.integers(0, 9))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    if choice <= 5 and real:
        cursor = draw(st.sampled_from(real))
        mutation = max(0, draw(st.integers(-2, 9)))
        index = draw(st.integers(0, max(0, len(cursor) - 1)))
        if mutation == 0:
            return cursor
        if mutation == 1:
            return cursor[:index] + draw(st.sampled_from(alphabet)) + cursor[index + 1 :]
        if mutation == 2:
            return cursor[:index]
        if mutation == 3:
            return cursor + draw(st.text(st.sampled_from(alphabet + "=+/ \n"), min_size=1, max_size=8))
        if mutation == 4:
            other = draw(st.sampled_from(real))
            return cursor[:index] + other[index:]
        if mutation == 5:
            return cursor.swapcase()
        if mutation == 6:
            return base64.urlsafe_b64encode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))[::-1]).decode()
        if mutation == 7:
            return cursor[index:] + cursor[:index]
        if mutation == 8:
            return cursor * draw(st.integers(2, 40))
        return " " + cursor
    if choice == 6:
        return draw(st.text(st.sampled_from(alphabet), max_size=300))
    if choice == 7:
        return draw(st.sampled_from(["", "0", "null", "-1", "x" * 4097, "A" * 65536, "=" * 10]))
    if choice == 8:
        return draw(texts)
    return draw(strict_values)


# Headers -------------------------------------------------------------------------------------------------------

latin1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40)


def encode_name(value: str) -> str:
    """An ``Mcp-Name`` value: plain when safe visible ASCII, else the ``=?base64?...?=`` form."""
    safe = value.isascii() and value.isprintable() and value == value.strip() and value != ""
    if safe and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


def header_safe(value: Any) -> str | None:
    """``value`` as a header value, when it can be one (latin-1, no control characters)."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    return value


def name_values(uri: Any) -> st.SearchStrategy[str | None]:
    """``Mcp-Name`` values for a request about ``uri``: right, encoded, malformed, absent."""
    right = encode_name(uri) if isinstance(uri, str) else None
    return st.one_of(
        st.just(right),
        st.just("=?base64?" + base64.b64encode(str(uri).encode("utf-8", "surrogatepass")).decode() + "?="),
        st.sampled_from(["=?base64?!!?=", "=?base64??=", "=?BASE64?bGVhcm4=?=", "=?base64?bGVhcm4?=", " x", "x "]),
        latin1,
        st.none(),
    )


ORIGINS = [
    "http://testserver",
    "http://127.0.0.1:8000",
    "null",
    "https://evil.example",
    "http://testserver.evil.example",
    "file://",
    "http://[::1",
    "http://a:99999",
    "http://localhost",
    "HTTP://TESTSERVER",
    "http://testserver/path",
    "",
]
HOSTS = ["testserver", "127.0.0.1:8000", "evil.example", "testserver:abc", "", "[::1]", "testserver.", "localhost:0"]
CONTENT_TYPES = [
    "application/json",
    "text/plain",
    "application/json; charset=latin-1",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
    "",
]


def authorization_values(tokens: dict[str, str]) -> st.SearchStrategy[tuple[str | None, str | None]]:
    """``(Authorization value, caller)``: the users' tokens, and every malformed form."""
    real = [(f"Bearer {token}", user) for user, token in tokens.items()]
    malformed = st.one_of(
        st.sampled_from(
            [
                "Bearer",
                "Bearer ",
                "bearer x",
                "Basic dXNlcjpwYXNz",
                "Bearer a b",
                "Bearer " + "a" * 5000,
                "Bearer =",
                "Bearer \u00e9t\u00e9",
                "Token abc",
                "Bearer,Bearer",
                ",",
            ]
        ),
        latin1,
        latin1.map(lambda value: "Bearer " + value),
    ).map(lambda value: (value, None))
    mangled = st.sampled_from(list(tokens.values())).flatmap(
        lambda token: st.sampled_from([token[:-1], token + "x", token.swapcase(), token[1:] + token[0]])
    )
    # RFC 6750: ``"Bearer" 1*SP b64token``; a server may also strip the value's trailing whitespace.
    spaced = st.sampled_from(sorted(tokens.items())).flatmap(
        lambda item: st.sampled_from([(f"Bearer  {item[1]}", item[0]), (f"Bearer {item[1]} ", item[0])])
    )
    return st.one_of(
        *[st.sampled_from(real)] * 6,
        st.just((None, None)),
        malformed,
        mangled.map(lambda token: (f"Bearer {token}", None)),
        spaced,
        st.sampled_from(list(tokens.values())).map(lambda token: (f"Bearer {token}, Bearer {token}", None)),
    )


def correct_headers(method: Any, params: Any, *, era: str, session: str | None = None) -> dict[str, str | None]:
    """The headers a correct client of ``era`` sends with a request for ``method`` with ``params``."""
    headers: dict[str, str | None] = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if era == SESSION:
        headers.update({"MCP-Protocol-Version": SESSION, "Mcp-Session-Id": session})
        return headers
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else STATELESS
    headers["MCP-Protocol-Version"] = header_safe(version) or STATELESS
    headers["Mcp-Method"] = header_safe(method)
    uri = params.get("uri") if isinstance(params, dict) else None
    if isinstance(uri, str):
        headers["Mcp-Name"] = encode_name(uri)
    return headers


@dataclass
class Headers:
    """The headers of one generated request (``None``: left out), and whose token it carries."""

    values: dict[str, str | None]
    caller: str | None
    content_length: str | None = None  # a lie about the body's length; ``None``: the truth

    def present(self) -> dict[str, str]:
        return {name: value for name, value in self.values.items() if value is not None}


@st.composite
def mutated_headers(draw: st.DrawFn, base: dict[str, str | None], tokens: dict[str, str]) -> Headers:
    """``base`` (the headers a correct client sends) with some replaced, dropped or added; an Authorization form."""
    values = dict(base)
    authorization, caller = draw(authorization_values(tokens))
    values["Authorization"] = authorization
    count = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))
    for name in draw(st.lists(st.sampled_from(HEADER_NAMES), min_size=count, max_size=count, unique=True)):
        values[name] = draw(HEADER_VALUES[name])
    length = draw(st.sampled_from([None] * 7 + CONTENT_LENGTH_LIES)) if draw(st.integers(0, 5)) == 0 else None
    return Headers(values, caller, length)


CONTENT_LENGTH_LIES = ["0", "1", "-1", "abc", "1e3", " 12", "+5", "99999999999999999999", "12_0", "", "0x10", "5 5"]
HEADER_VALUES: dict[str, st.SearchStrategy[str | None]] = {
    "MCP-Protocol-Version": st.one_of(st.sampled_from(VERSIONS), latin1, st.none()),
    "Mcp-Method": st.one_of(st.sampled_from(KNOWN_METHODS), latin1, st.none()),
    "Mcp-Name": st.one_of(name_values("learn://documents/1"), st.none()),
    "Mcp-Session-Id": st.one_of(
        st.none(), latin1, st.text(st.sampled_from("0123456789abcdef"), min_size=1, max_size=300)
    ),
    "Content-Type": st.one_of(st.sampled_from(CONTENT_TYPES), latin1, st.none()),
    "Origin": st.one_of(st.sampled_from(ORIGINS), latin1),
    "Host": st.one_of(st.sampled_from(HOSTS), latin1),
    "Accept": st.one_of(st.sampled_from(["*/*", "text/html", "application/json", ""]), latin1),
    "Last-Event-ID": st.one_of(st.sampled_from(["0", "-1", "abc"]), latin1),
    "Mcp-Param-Uri": latin1,
    "X-Forwarded-Host": st.sampled_from(["evil.example", "testserver"]),
    "Transfer-Encoding": st.sampled_from(["chunked", "gzip", "identity"]),
}
HEADER_NAMES = list(HEADER_VALUES)
