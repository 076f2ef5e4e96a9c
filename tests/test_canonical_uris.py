"""One URI per record (issue 13): the URI a template produces for a record is the only one that reads it.

``learn://documents/1`` used to be read as ``01``, ``0001``, ``%31``, Arabic-Indic, fullwidth or Devanagari digits,
and ``1_0`` read document 10 (``int()`` accepts underscores and every Unicode digit); the answer repeated the form
asked for, and a listen on ``learn://documents/01`` was acknowledged and never notified. Every other spelling of a
record's variables is now answered exactly like a missing record, in both protocol eras, by ``resources/read``,
``resources/subscribe`` and ``subscriptions/listen`` (left out of its acknowledgement).

The reads go through the real view (``MCPClient``, the demo's registry); subscribe and listen through the project's
ASGI application in-process, as in test_streams.py. A Hypothesis property test generates spellings of real
records' URIs for templates over integer, text and two-variable lookups.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pytest
from django.contrib.auth.models import User
from django.db import models
from django.test.utils import isolate_apps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND_2025_11_25, MCPError
from mcp_resources.protocol.uris import validate_uri
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from mcp_resources.test import MCPClient
from testproject.library.models import Document, Note
from tests.conftest import RESOURCE
from tests.listing_support import (
    SCOPE,
    GenericSource,
    assert_generic_internal_error,
    context,
    list_page,
    rpc_error,
    server_for,
    thing,
    uris,
)
from tests.stream_support import (
    ACKNOWLEDGED,
    Exchange,
    application,
    in_thread,
    listen_body,
    listen_headers,
    scope,
    updated,
)

ERAS = [V2026_07_28, V2025_11_25]
NOT_FOUND = {V2026_07_28: INVALID_PARAMS, V2025_11_25: RESOURCE_NOT_FOUND_2025_11_25}
MISSING = "learn://documents/999999999"

ARABIC_INDIC, FULLWIDTH, DEVANAGARI = 0x0660, 0xFF10, 0x0966


def digits_in(text: str, zero: int) -> str:
    return "".join(chr(zero + int(ch)) for ch in text)


def spellings(pk: int) -> dict[str, str]:
    """Other spellings of the variable ``str(pk)`` that today's code read as record ``pk`` (or another record)."""
    text = str(pk)
    assert len(text) >= 2, "pick a record whose id has two digits or more (for the underscore form)"
    return {
        "leading zero": "0" + text,
        "leading zeros": "000" + text,
        "percent-encoded digit": f"%{ord(text[0]):02X}{text[1:]}",
        "percent-encoded, lower case": "".join(f"%{ord(ch):02x}" for ch in text),
        "arabic-indic digits": digits_in(text, ARABIC_INDIC),
        "fullwidth digits": digits_in(text, FULLWIDTH),
        "devanagari digits": digits_in(text, DEVANAGARI),
        "percent-encoded fullwidth digits": "".join(f"%{b:02X}" for b in digits_in(text, FULLWIDTH).encode()),
        "underscore": text[0] + "_" + text[1:],
        "plus sign": "%2B" + text,
        "leading space": "%20" + text,
        "trailing space": text + "%20",
        "tab": "%09" + text,
        "newline": text + "%0A",
    }


@pytest.fixture
def documents(alice: User) -> list[Document]:
    """Alice's documents, at least eleven so that one has an id of two digits or more."""
    return [Document.objects.create(owner=alice, title=f"Doc {i}", body=f"body {i}") for i in range(11)]


@pytest.fixture
def target(documents: list[Document]) -> Document:
    return next(doc for doc in documents if doc.pk >= 10)


def client_for(user: User, version: str) -> MCPClient:
    client = MCPClient(protocol_version=version)
    client.force_authenticate(user, scopes=[SCOPE])
    return client


def read_error(client: MCPClient, uri: str) -> MCPError:
    with pytest.raises(MCPError) as info:
        client.read_resource(uri)
    return info.value


def assert_like_a_missing_record(client: MCPClient, uri: str, version: str) -> None:
    missing, refused = read_error(client, MISSING), read_error(client, uri)
    assert (refused.code, refused.message, refused.data) == (missing.code, missing.message, {"uri": uri})
    assert refused.code == NOT_FOUND[version]


# resources/read ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("form", list(spellings(10)))
def test_other_spellings_of_a_document_are_not_found(alice: User, target: Document, version: str, form: str) -> None:
    client = client_for(alice, version)
    canonical = f"learn://documents/{target.pk}"
    assert client.read_resource(canonical)["contents"][0] == {
        "uri": canonical,
        "text": target.body,
        "mimeType": "text/plain",
    }
    assert_like_a_missing_record(client, f"learn://documents/{spellings(target.pk)[form]}", version)


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_underscores_do_not_read_another_record(alice: User, documents: list[Document], version: str) -> None:
    """``1_0`` read document 10: ``int("1_0") == 10``."""
    ten = next(doc for doc in documents if doc.pk >= 10)
    assert_like_a_missing_record(
        client_for(alice, version), f"learn://documents/{str(ten.pk)[0]}_{str(ten.pk)[1:]}", version
    )


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_a_template_with_a_computed_scope_refuses_them_too(alice: User, version: str) -> None:
    """The demo's notes template overrides ``get_queryset()``: the rule does not depend on how the scope is made."""
    notes = [Note.objects.create(owner=alice, title=f"n{i}", text=f"note {i}") for i in range(11)]
    note = next(n for n in notes if n.pk >= 10)
    client = client_for(alice, version)
    assert client.read_resource(f"learn://notes/{note.pk}")["contents"][0]["uri"] == f"learn://notes/{note.pk}"
    for form in spellings(note.pk).values():
        error = read_error(client, f"learn://notes/{form}")
        assert (error.code, error.data) == (NOT_FOUND[version], {"uri": f"learn://notes/{form}"})


# resources/subscribe and subscriptions/listen, through the project's ASGI application -----------------------------


@pytest.fixture
def asgi(settings: Any) -> Any:
    """The project's ASGI application, with tokens bound to the demo's resource URI accepted."""
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "STREAM_KEEPALIVE_SECONDS": 30}
    return application()


async def post(app: Any, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    exchange = await Exchange(app, scope("POST", {"content-type": "application/json", **headers})).start(
        json.dumps(body).encode()
    )
    raw = await exchange.body()
    return exchange.status, exchange.headers, json.loads(raw) if raw else None


async def session_of(app: Any, token: str) -> dict[str, str]:
    """The headers of a new 2025-11-25 session of ``token``'s caller."""
    headers = {"mcp-protocol-version": V2025_11_25, "authorization": f"Bearer {token}"}
    params = {"protocolVersion": V2025_11_25, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "0"}}
    status, answer, payload = await post(
        app, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers
    )
    assert status == 200, payload
    return {**headers, "mcp-session-id": answer["mcp-session-id"]}


async def subscribe(app: Any, session: dict[str, str], uri: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": uri}}
    status, _, payload = await post(app, body, session)
    assert status == 200
    return payload


def touch(doc: Document) -> None:
    doc.refresh_from_db()
    doc.body += "!"
    doc.save()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_subscribe_refuses_other_spellings_like_a_missing_record(
    asgi: Any, alice: User, make_token: Callable[..., str]
) -> None:
    doc = await in_thread(lambda: [Document.objects.create(owner=alice, title=f"{i}", body="b") for i in range(11)][-1])
    token = await in_thread(make_token, alice)
    session = await session_of(asgi, token)
    missing = (await subscribe(asgi, session, MISSING))["error"]
    assert missing["code"] == RESOURCE_NOT_FOUND_2025_11_25
    for form in spellings(doc.pk).values():
        uri = f"learn://documents/{form}"
        assert (await subscribe(asgi, session, uri))["error"] == {**missing, "data": {"uri": uri}}
    assert (await subscribe(asgi, session, f"learn://documents/{doc.pk}")) == {"jsonrpc": "2.0", "id": 5, "result": {}}


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_listen_leaves_other_spellings_out_of_its_acknowledgement(
    asgi: Any, alice: User, make_token: Callable[..., str]
) -> None:
    """A listen on ``learn://documents/01`` was acknowledged, then never notified: notifications name the
    canonical URI (``get_uri()``). Now only the canonical URI is acknowledged, and it is notified."""
    doc = await in_thread(lambda: [Document.objects.create(owner=alice, title=f"{i}", body="b") for i in range(11)][-1])
    token = await in_thread(make_token, alice)
    canonical = f"learn://documents/{doc.pk}"
    others = [f"learn://documents/{form}" for form in spellings(doc.pk).values()]
    notifications = {"resourceSubscriptions": [*others, canonical]}
    stream = await Exchange(asgi, scope("POST", listen_headers(token))).start(listen_body(1, notifications))
    assert stream.status == 200
    ack = await stream.event()
    assert ack["method"] == ACKNOWLEDGED
    assert ack["params"]["notifications"] == {"resourceSubscriptions": [canonical]}
    await in_thread(touch, doc)
    assert await stream.event() == updated(canonical, 1)
    await stream.disconnect()


# The property: of every spelling of a real record's URI, only the canonical one reads -----------------------------


class Documents(ModelResourceTemplate):
    """An integer key (the demo's documents, scope declared)."""

    model = Document
    name = "documents"
    uri_template = "learn://documents/{id}"
    required_scopes = (SCOPE,)
    ordering = ("created", "id")
    queryset = Document.objects.filter(deleted_at__isnull=True)
    owner_field = "owner"

    def get_contents(self, request: Any, obj: Any) -> Any:
        return obj.body


class People(ModelResourceTemplate):
    """A text key: users by username (any text, digits of any script included)."""

    model = User
    name = "people"
    uri_template = "learn://people/{username}"
    required_scopes = (SCOPE,)

    def get_queryset(self, request: Any) -> Any:
        return User.objects.all()

    def get_contents(self, request: Any, obj: Any) -> Any:
        return f"user {obj.username}"


class OwnersDocuments(ModelResourceTemplate):
    """Two variables, one through a relation: ``owner__username`` and the id."""

    model = Document
    name = "owners-documents"
    uri_template = "learn://users/{user}/documents/{id}"
    lookup_fields = {"user": "owner__username", "id": "id"}
    required_scopes = (SCOPE,)

    def get_queryset(self, request: Any) -> Any:
        return Document.objects.all()

    def get_contents(self, request: Any, obj: Any) -> Any:
        return obj.body


PROPERTY_SERVER = server_for(Documents, People, OwnersDocuments, name="canonical-uris")
USERNAMES = [
    "bob",
    "Zoë",
    "12",
    "\u0661\u0662",
    "\uff11\uff12",
    "a b",
    "x/y",
    "100%",
    "e\u0301",
    "~._-",
    "ⅫⅨ",
    "0012",
    "+1",
    "-1",
]
OTHER_DIGITS = [0x0660, 0x06F0, 0x0966, 0x09E6, 0x0E50, 0xFF10, 0x1D7CE]  # zeros of other scripts' digits


@pytest.fixture
def world(alice: User) -> dict[str, Any]:
    """Alice's documents and users with awkward names: every record a template of PROPERTY_SERVER can read."""
    people = [alice] + [User.objects.create(username=name) for name in USERNAMES]
    docs = [Document.objects.create(owner=people[i % 3], title=f"t{i}", body=f"document {i}") for i in range(24)]
    records = {"documents": [d for d in docs if d.owner_id == alice.pk], "people": people, "owners-documents": docs}
    return {"alice": alice, "records": records}


def _quote_char(ch: str, lower: bool) -> str:
    return "".join(f"%{b:02x}" if lower else f"%{b:02X}" for b in ch.encode())


@st.composite
def respelled(draw: st.DrawFn, segment: str) -> str:
    """``segment`` (a variable as the canonical URI spells it) spelled another way, or unchanged."""
    kind = draw(
        st.sampled_from(
            ["quote", "unquote", "hex case", "zeros", "underscore", "sign", "space", "digits", "case", "same"]
        )
    )
    if kind == "quote":  # percent-encode one character (an unreserved one, or a '%' of a triplet)
        i = draw(st.integers(0, len(segment) - 1))
        return segment[:i] + _quote_char(segment[i], draw(st.booleans())) + segment[i + 1 :]
    if kind == "unquote" and "%" in segment:  # the IRI form: triplets as the characters they encode
        return unquote(segment)
    if kind == "hex case":  # lower-case hex digits in the triplets (the template writes upper case)
        return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), segment)
    if kind == "zeros":
        return "0" * draw(st.integers(1, 3)) + segment
    if kind == "underscore" and len(segment) > 1:
        i = draw(st.integers(1, len(segment) - 1))
        return segment[:i] + "_" + segment[i:]
    if kind == "sign":
        return draw(st.sampled_from(["%2B", "%2b", "-", "%2D"])) + segment
    if kind == "space":
        pad = draw(st.sampled_from(["%20", "%09", "%0A", "%0D", "%0C", "%C2%A0", "%E3%80%80"]))
        return pad + segment if draw(st.booleans()) else segment + pad
    if kind == "digits" and any(ch.isdigit() for ch in segment):
        zero, quoted = draw(st.sampled_from(OTHER_DIGITS)), draw(st.booleans())
        out = []
        for ch in segment:
            if ch in "0123456789":
                other = chr(zero + int(ch))
                out.append(_quote_char(other, False) if quoted else other)
            else:
                out.append(ch)
        return "".join(out)
    if kind == "case":
        return segment.swapcase()
    return segment


@st.composite
def spelled(draw: st.DrawFn, world: dict[str, Any]) -> tuple[str, Any, str]:
    """(template name, record, a spelling of the record's URI): each variable respelled or not."""
    name = draw(st.sampled_from(sorted(world["records"])))
    template = PROPERTY_SERVER.registry.get_template(name)
    record = draw(st.sampled_from(world["records"][name]))
    canonical = template.get_uri(record)
    compiled = template.compiled
    spans = compiled._variable_spans(canonical)
    out, last = [], 0
    for start, end in spans:
        out.append(canonical[last:start])
        out.append(draw(respelled(canonical[start:end])))
        last = end
    out.append(canonical[last:])
    return name, record, "".join(out)


def contents_of(template_name: str, record: Any) -> str:
    return f"user {record.username}" if template_name == "people" else record.body


@pytest.mark.django_db
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), version=st.sampled_from(ERAS))
def test_only_the_canonical_uri_of_a_record_reads_it(world: dict[str, Any], data: st.DataObject, version: str) -> None:
    name, record, uri = data.draw(spelled(world))
    template = PROPERTY_SERVER.registry.get_template(name)
    assert template is not None
    ctx = context(world["alice"], version=version)
    # The record's canonical URI reads it, and the contents carry that URI.
    own = template.get_uri(record)
    (item,) = PROPERTY_SERVER.call("resources/read", {"uri": own}, ctx)["contents"]
    assert item == {"uri": own, "text": contents_of(name, record)}
    canonical = {template.get_uri(r): r for r in world["records"][name]}
    if uri in canonical:
        # This spelling is the canonical URI of a record (this one, or one whose URI it happens to be): it reads that.
        (item,) = PROPERTY_SERVER.call("resources/read", {"uri": uri}, ctx)["contents"]
        assert item == {"uri": uri, "text": contents_of(name, canonical[uri])}
        return
    try:
        validate_uri(uri)
    except ValueError:
        return  # not a URI at all (a raw control character): refused before routing
    # Any other spelling is answered exactly like a missing record.
    missing = rpc_error(lambda: PROPERTY_SERVER.call("resources/read", {"uri": MISSING}, ctx))
    refused = rpc_error(lambda: PROPERTY_SERVER.call("resources/read", {"uri": uri}, ctx))
    assert (refused.code, refused.message, refused.data) == (missing.code, missing.message, {"uri": uri})


# The same rule for list() callbacks and parse_uri overrides --------------------------------------------------------


class Things(GenericSource):
    """A generic template: its variables are text, read as they are decoded."""

    items = [thing("A"), thing("%C3%A9")]


@pytest.mark.django_db
@pytest.mark.parametrize("listed", ["learn://things/%41", "learn://things/%c3%a9", "learn://things/\u00e9"])
def test_a_list_callback_listing_another_spelling_breaks_the_contract(
    alice: User, caplog: pytest.LogCaptureFixture, listed: str
) -> None:
    """A listed URI must be the one a read accepts: ``%41`` reads nothing (``A`` does), nor does a raw ``é``."""
    other = type("Other", (GenericSource,), {"items": [thing("A"), ("b", {"uri": listed, "name": "b"})]})
    assert_generic_internal_error(lambda: list_page(server_for(other), context(alice)))
    assert "in the one spelling it reads" in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_a_generic_template_reads_only_the_canonical_spelling(alice: User, version: str) -> None:
    server = server_for(Things)
    ctx = context(alice, version=version)
    assert uris([list_page(server, ctx)]) == ["learn://things/%C3%A9", "learn://things/A"]
    for uri, text in (("learn://things/A", "thing A"), ("learn://things/%C3%A9", "thing \u00e9")):
        assert server.call("resources/read", {"uri": uri}, ctx)["contents"] == [{"uri": uri, "text": text}]
    for uri in ("learn://things/%41", "learn://things/%c3%a9", "learn://things/\u00e9"):
        error = rpc_error(lambda uri=uri: server.call("resources/read", {"uri": uri}, ctx))
        assert (error.code, error.data) == (NOT_FOUND[version], {"uri": uri})


class Cities(ResourceTemplate):
    """A ``parse_uri`` override that folds case: ``Paris`` parses as ``paris``, whose URI is ``.../paris``."""

    name = "cities"
    uri_template = "learn://cities/{city}"
    access = "public"

    def parse_uri(self, uri: str) -> Any:
        variables = super().parse_uri(uri)
        return None if variables is None else {"city": variables["city"].lower()}

    def read(self, request: Any, uri: str, variables: Any) -> Any:
        return f"weather in {variables['city']}"


class Pairs(ResourceTemplate):
    """A ``parse_uri`` override returning a tuple for two variables: it must say how the tuple is spelled."""

    name = "pairs"
    uri_template = "learn://pairs/{a}/{b}"
    access = "public"

    def parse_uri(self, uri: str) -> Any:
        variables = super().parse_uri(uri)
        return None if variables is None else (int(variables["a"]), int(variables["b"]))

    def read(self, request: Any, uri: str, variables: Any) -> Any:
        return f"{variables[0]} and {variables[1]}"


class SpelledPairs(Pairs):
    name = "spelled-pairs"
    uri_template = "learn://spelled-pairs/{a}/{b}"

    def canonical_uri(self, parsed: Any) -> str:
        return self.compiled.expand({"a": parsed[0], "b": parsed[1]})


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_a_parse_uri_override_serves_only_the_uri_of_what_it_returns(alice: User, version: str) -> None:
    server = server_for(Cities, SpelledPairs)
    ctx = context(alice, version=version)
    assert server.call("resources/read", {"uri": "learn://cities/paris"}, ctx)["contents"][0]["text"] == (
        "weather in paris"
    )
    assert server.call("resources/read", {"uri": "learn://spelled-pairs/1/2"}, ctx)["contents"][0]["uri"] == (
        "learn://spelled-pairs/1/2"
    )
    for uri in (
        "learn://cities/Paris",
        "learn://cities/PARIS",
        "learn://spelled-pairs/01/2",
        "learn://spelled-pairs/1/%32",
    ):
        error = rpc_error(lambda uri=uri: server.call("resources/read", {"uri": uri}, ctx))
        assert (error.code, error.data) == (NOT_FOUND[version], {"uri": uri})


@pytest.mark.django_db
def test_a_parse_uri_override_whose_value_cannot_be_spelled_is_a_logged_error(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    server = server_for(Pairs)
    with caplog.at_level(logging.ERROR, logger="mcp_resources.server"):
        error = rpc_error(lambda: server.call("resources/read", {"uri": "learn://pairs/1/2"}, context(alice)))
    assert (error.code, error.message) == (INTERNAL_ERROR, "Internal error")
    assert "Pairs.parse_uri() returned tuple" in caplog.text
    assert "override canonical_uri()" in caplog.text


# Field types: a record's own URI reads back, other spellings of its values do not --------------------------------


@isolate_apps("tests")
def test_each_field_type_spells_its_values_one_way() -> None:
    class Thing(models.Model):
        key = models.UUIDField()
        day = models.DateField()
        at = models.DateTimeField()
        price = models.DecimalField(max_digits=8, decimal_places=2)
        flag = models.BooleanField()
        code = models.CharField(max_length=20)

        class Meta:
            app_label = "tests"

        def __str__(self) -> str:
            return self.code

    class Things(ModelResourceTemplate):
        model = Thing
        name = "typed"
        uri_template = "typed://{key}/{day}/{at}/{price}/{flag}/{code}"

    template = Things()
    key = uuid.UUID("abcdef12-3456-789a-bcde-f0123456789a")
    # Values as the database gives them back: an aware datetime, a Decimal with its decimal places. Each other
    # spelling below is one the field's to_python() accepts for the same value.
    at = datetime.datetime(2024, 1, 5, 12, 30, 1, 250, tzinfo=datetime.UTC)
    thing = Thing(key=key, day=datetime.date(2024, 1, 5), at=at, price=Decimal("1.50"), flag=True, code="é/1")
    own = template.get_uri(thing)
    assert template.resolve_uri(own) is not None
    parts = own.split("/", 2)[2].split("/")
    others = {
        0: [key.hex, str(key).upper(), "%7B" + str(key) + "%7D", "urn%3Auuid%3A" + str(key)],
        1: ["20240105", "2024-1-5"],
        2: ["2024-01-05T12%3A30%3A01.000250%2B00%3A00", "2024-01-05%2012%3A30%3A01.00025Z"],
        # Not "1.5": it converts to Decimal("1.5"), a spelling of its own that the database compares equal to 1.50
        # (the caveat of docs/resources.md, "One URI per record").
        3: ["01.50", "%2B1.50", "1.50%20"],
        4: ["true", "1", "t"],
        5: ["%c3%a9%2F1", "\u00e9%2F1"],
    }
    for index, spellings_ in others.items():
        for spelling in spellings_:
            other = "typed://" + "/".join([*parts[:index], spelling, *parts[index + 1 :]])
            assert other != own
            assert template.resolve_uri(other) is None, other
