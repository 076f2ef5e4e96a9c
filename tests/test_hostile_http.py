"""Hostile bytes on a real socket: the demo under uvicorn on loopback (tests/live.py), a small budget.

Each generated request is written byte for byte to a new connection: a generated JSON-RPC message or random bytes,
the headers a correct client sends with some mutated, and framing an attacker chooses (a ``Content-Length`` that
lies either way, two of them, chunked bodies with bad chunk sizes, both framings at once, no framing), with now
and then a broken head (a header without a colon, a space in a name, an obsolete line fold, bytes outside ASCII, a
NUL, a 20 KB header, 150 headers). Every response that comes back has a status below 500: the app's answers keep
the rule of tests/hostile_support.py, uvicorn's own refusals of broken HTTP are its plain ``400``. The server logs
no traceback, and answers a correct request afterwards.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import live
from tests.hostile_support import (
    CLIENT_CAPABILITIES_META,
    PROTOCOL_VERSION_META,
    STATELESS,
    Answer,
    budget,
    check_answer,
    correct_headers,
    messages,
    mutated_headers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore:Generating overly large repr")]


@dataclass
class RawRequest:
    data: bytes
    complete: bool  # whether the server has all it needs to answer
    caller: str | None
    at_endpoint: bool  # the MCP endpoint's path (others are Django's pages)


@dataclass(repr=False)
class Target:
    server: live.Server
    tokens: dict[str, str]

    def __repr__(self) -> str:
        return f"Target({self.server.url})"


@pytest.fixture(scope="module")
def target(demo_server: live.Server) -> Iterator[Target]:
    yield Target(demo_server, demo_server.tokens("alice", "bob"))
    # Still healthy, and nothing went wrong inside.
    healthy(demo_server)
    demo_server.assert_log_clean()


def healthy(server: live.Server) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {"_meta": {PROTOCOL_VERSION_META: STATELESS, CLIENT_CAPABILITIES_META: {}}},
        }
    ).encode()
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": STATELESS, "Mcp-Method": "server/discover"}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/mcp", body, headers)
        response = conn.getresponse()
        assert response.status == 200, response.read()
        assert b"supportedVersions" in response.read()
    finally:
        conn.close()


BROKEN_LINES = [
    b"NoColonHere",
    b"Bad Name: x",
    b" folded continuation",
    b"X-Binary: \x80\xff\xfe",
    b"X-Nul: a\x00b",
    b"X-Long: " + b"a" * 20000,
    b"\r\n".join(b"X-Many-%d: x" % i for i in range(150)),
    b"Content-Length: 5, 5",
    b": empty-name",
    b"X-Ctl: a\x01b",
]


@st.composite
def raw_requests(draw: st.DrawFn, tokens: dict[str, str]) -> RawRequest:
    message = draw(messages())
    body = message.body(ascii_only=draw(st.booleans())) if draw(st.integers(0, 5)) else draw(st.binary(max_size=300))
    headers = draw(mutated_headers(correct_headers(message.method, message.params, era=STATELESS), tokens))
    headers.values.pop("Host", None) if draw(st.integers(0, 3)) else None
    lines = [f"{name}: {value}".encode("latin-1") for name, value in headers.present().items() if name != "Host"]
    host = headers.values.get("Host")
    lines.insert(0, b"Host: " + (host if host is not None else "127.0.0.1").encode("latin-1"))
    lines.append(b"Connection: close")  # one answer per connection: no wait for uvicorn's keep-alive timeout
    framing = draw(
        st.sampled_from(["length"] * 6 + ["short", "long", "chunked", "bad-chunks", "both", "twice", "none"])
    )
    # A mutated Transfer-Encoding header frames the body too: the server may wait for chunks that never come.
    complete = "Transfer-Encoding" not in headers.present()
    if framing in ("length", "short"):
        length = len(body) if framing == "length" else max(0, len(body) - draw(st.integers(1, 10)))
        lines.append(b"Content-Length: %d" % length)
        payload = body
    elif framing == "long":
        lines.append(b"Content-Length: %d" % (len(body) + draw(st.integers(1, 1000))))
        payload, complete = body, False
    elif framing == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        size = draw(st.integers(1, 64))
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        payload = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    elif framing == "bad-chunks":
        lines.append(b"Transfer-Encoding: chunked")
        payload = draw(st.sampled_from([b"zz\r\n", b"-1\r\n", b"ffffffffffffffffff\r\n", b"5\r\nab\r\n0\r\n\r\n"]))
        payload += body
        complete = False  # may be refused at once, or wait for bytes that never come
    elif framing == "both":
        lines += [b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked"]
        payload, complete = body, False
    elif framing == "twice":
        lines += [b"Content-Length: %d" % len(body), b"Content-Length: %d" % (len(body) + 1)]
        payload, complete = body, False
    else:
        payload = body  # no framing: an empty body, then the body's bytes read as a next request
    if draw(st.integers(0, 5)) == 0:
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(BROKEN_LINES)))
        complete = False
    http_method = draw(st.sampled_from(["POST"] * 8 + ["GET", "DELETE", "PUT", "OPTIONS", "FOO", "P OST"]))
    target_path = draw(st.sampled_from(["/mcp"] * 8 + ["/mcp?x=1", "/mcp/", "//mcp", "/MCP", "/mcp%00", "*"]))
    version = draw(st.sampled_from(["HTTP/1.1"] * 8 + ["HTTP/1.0", "HTTP/2.0", "HTTP/1.1x", "http/1.1"]))
    head = f"{http_method} {target_path} {version}".encode() + b"\r\n" + b"\r\n".join(lines) + b"\r\n\r\n"
    return RawRequest(head + payload, complete, headers.caller, target_path.split("?")[0] == "/mcp")


def exchange_bytes(port: int, data: bytes, *, wait: float) -> bytes:
    """Write ``data`` on a new connection and read until the server closes it or ``wait`` seconds pass."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + wait
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
            head = received.split(b"\r\n\r\n", 1)[0].lower()
            if b"\r\n\r\n" in received and b"content-type: text/event-stream" in head:
                break  # a stream: it stays open; leaving ends it
    return received


class _Unclosable(io.BufferedReader):
    def close(self) -> None:  # http.client closes its file after each response: the next one follows in it
        pass


class _Replay:
    """A socket whose bytes are already read, for ``http.client.HTTPResponse``."""

    def __init__(self, data: bytes) -> None:
        self.file = _Unclosable(io.BytesIO(data))  # type: ignore[arg-type]

    def makefile(self, mode: str) -> Any:
        return self.file


def responses(data: bytes) -> Iterator[tuple[Answer, bool]]:
    """The responses in ``data``, in order; ``(answer, whole)`` where ``whole`` says the body was complete."""
    replay = _Replay(data)
    while replay.file.peek(1):
        response = http.client.HTTPResponse(replay)  # type: ignore[arg-type]
        response.begin()
        headers = {name.lower(): value for name, value in response.getheaders()}
        if headers.get("content-type") == "text/event-stream":
            yield Answer(response.status, headers, b""), False
            return
        try:
            body = response.read()
        except http.client.IncompleteRead as exc:
            yield Answer(response.status, headers, exc.partial), False
            return
        yield Answer(response.status, headers, body), True


@budget(40)
@given(data=st.data())
def test_hostile_bytes_on_a_socket_never_get_a_5xx_or_a_traceback(target: Target, data: st.DataObject) -> None:
    request = data.draw(raw_requests(target.tokens))
    received = exchange_bytes(target.server.port, request.data, wait=15 if request.complete else 0.5)
    if request.complete:
        assert received, "no answer to a complete request"
    for answer, whole in responses(received):
        assert answer.status < 500, (answer, request.data[:400])
        if answer.content_type == "text/plain":
            # uvicorn's own refusal of a request it cannot parse.
            assert answer.status == 400, answer
            assert answer.body in (b"Invalid HTTP request received.", b""), answer
        elif whole and request.at_endpoint:
            check_answer(answer, request.data, caller=request.caller)
    target.server.assert_log_clean()
