"""Pure unit tests of the JSON-RPC 2.0 framing and the error classes (no database)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_resources import exceptions
from mcp_resources.exceptions import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND_2025_11_25,
    InvalidParams,
    InvalidRequest,
    MCPError,
    ParseError,
)
from mcp_resources.protocol.jsonrpc import (
    Message,
    dumps,
    dumps_plain,
    loads,
    parse_message,
    result_response,
)


def body(payload: object) -> bytes:
    return json.dumps(payload).encode()


def refused(raw: bytes) -> MCPError:
    with pytest.raises(MCPError) as info:
        parse_message(raw)
    return info.value


# Parse errors -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping",}',
        b"{'jsonrpc': '2.0'}",
        b"not json",
        b'{"jsonrpc":"2.0","id":1,"method":"ping"} trailing',
    ],
    ids=["empty", "unclosed", "trailing-comma", "single-quotes", "bare-words", "trailing-garbage"],
)
def test_invalid_json_is_a_parse_error(raw):
    error = refused(raw)
    assert type(error) is ParseError
    assert error.code == PARSE_ERROR == -32700
    assert error.http_status == 400


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xc3"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # an encoded surrogate is not UTF-8
    ],
)
def test_invalid_utf8_is_a_parse_error(raw):
    assert refused(raw).code == PARSE_ERROR


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_constants_are_parse_errors(constant):
    raw = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":%s}}' % constant.encode()
    assert refused(raw).code == PARSE_ERROR


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:b","uri":"a:c"}}',
    ],
    ids=["top-level", "nested"],
)
def test_duplicate_keys_are_parse_errors(raw):
    assert refused(raw).code == PARSE_ERROR


def test_deep_nesting_is_a_parse_error_not_a_crash():
    raw = b"[" * 100_000 + b"]" * 100_000
    assert refused(raw).code == PARSE_ERROR


def test_integer_with_too_many_digits_is_a_parse_error():
    raw = b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}'
    assert refused(raw).code == PARSE_ERROR


def test_parse_error_response_has_null_id():
    error = refused(b"{")
    assert error.to_response() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: Invalid JSON"},
    }


def test_loads_accepts_str_and_rejects_bad_bytes():
    assert loads('{"a":[1,"é"]}') == {"a": [1, "é"]}
    assert loads(b'{"a":1}') == {"a": 1}
    with pytest.raises(ParseError):
        loads(b"\xff")


# Invalid requests -------------------------------------------------------------------------------------------


def test_batches_are_refused():
    error = refused(body([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
    assert type(error) is InvalidRequest
    assert error.code == INVALID_REQUEST == -32600
    assert error.to_response()["id"] is None


def test_empty_batch_is_refused():
    assert refused(b"[]").code == INVALID_REQUEST


@pytest.mark.parametrize("payload", [1, "ping", None, True, 2.5])
def test_non_object_bodies_are_invalid_requests(payload):
    assert refused(body(payload)).code == INVALID_REQUEST


@pytest.mark.parametrize("version", ["1.0", "2", 2.0, None, "2.0 "])
def test_wrong_jsonrpc_version_is_refused_with_the_id(version):
    error = refused(body({"jsonrpc": version, "id": 7, "method": "ping"}))
    assert error.code == INVALID_REQUEST
    assert error.to_response()["id"] == 7


def test_missing_jsonrpc_member_is_refused():
    error = refused(body({"id": "a", "method": "ping"}))
    assert error.code == INVALID_REQUEST
    assert error.to_response()["id"] == "a"


@pytest.mark.parametrize("bad_id", [None, 1.5, 1.0, True, False, {"a": 1}, [1]])
def test_ids_that_are_not_strings_or_integers_are_refused(bad_id):
    error = refused(body({"jsonrpc": "2.0", "id": bad_id, "method": "ping"}))
    assert error.code == INVALID_REQUEST
    # An unusable id is never echoed back.
    assert error.to_response()["id"] is None


def test_missing_method_is_refused_with_the_id():
    error = refused(body({"jsonrpc": "2.0", "id": 3}))
    assert error.code == INVALID_REQUEST
    assert error.to_response()["id"] == 3


@pytest.mark.parametrize("method", [1, None, ["ping"], {"m": 1}, True, ""])
def test_method_must_be_a_non_empty_string(method):
    error = refused(body({"jsonrpc": "2.0", "id": "r1", "method": method}))
    assert error.code == INVALID_REQUEST
    assert error.to_response()["id"] == "r1"


@pytest.mark.parametrize("params", [[], [1, 2], "x", 1, None, True])
def test_params_must_be_an_object(params):
    error = refused(body({"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": params}))
    assert type(error) is InvalidParams
    assert error.code == INVALID_PARAMS == -32602
    assert error.to_response()["id"] == 9


@pytest.mark.parametrize("member", ["Params", "METHOD", "Id", "extra", "result"])
def test_unexpected_members_are_refused(member):
    payload = {"jsonrpc": "2.0", "id": 4, "method": "ping", member: {}}
    error = refused(body(payload))
    assert error.code == INVALID_REQUEST
    assert error.to_response()["id"] == 4


def test_params_in_another_case_are_not_read_as_params():
    # Member names are matched exactly: "Params" is not "params", and it is refused rather than ignored.
    error = refused(body({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "Params": {"uri": "a:b"}}))
    assert type(error) is InvalidRequest


# Valid messages ---------------------------------------------------------------------------------------------


def test_request_with_integer_id():
    message = parse_message(body({"jsonrpc": "2.0", "id": 0, "method": "resources/list", "params": {"a": 1}}))
    assert message == Message(method="resources/list", params={"a": 1}, id=0)
    assert not message.is_notification
    assert not message.is_response


def test_request_with_string_id_and_no_params():
    message = parse_message(body({"jsonrpc": "2.0", "id": "abc", "method": "ping"}))
    assert message.id == "abc"
    assert message.params == {}
    assert not message.is_notification


def test_large_and_negative_integer_ids_are_kept_exactly():
    big = 2**70
    assert parse_message(body({"jsonrpc": "2.0", "id": big, "method": "ping"})).id == big
    assert parse_message(body({"jsonrpc": "2.0", "id": -1, "method": "ping"})).id == -1


def test_notification_has_no_id():
    message = parse_message(body({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert message.is_notification
    assert not message.is_response
    assert message.id is None
    assert message.method == "notifications/initialized"


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0", "id": 5, "result": {}},
        {"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}},
    ],
)
def test_client_responses_are_recognised(payload):
    message = parse_message(body(payload))
    assert message.is_response
    assert not message.is_notification
    assert message.method is None
    assert message.id == payload["id"]


def test_result_without_id_is_not_a_response():
    assert refused(body({"jsonrpc": "2.0", "result": {}})).code == INVALID_REQUEST


# Errors and serialization -----------------------------------------------------------------------------------


def test_error_hierarchy_codes_and_statuses():
    assert exceptions.MethodNotFound().code == METHOD_NOT_FOUND == -32601
    assert exceptions.MethodNotFound().http_status == 404
    assert exceptions.InternalError().code == INTERNAL_ERROR == -32603
    assert exceptions.InternalError().http_status == 200  # never an HTTP 500: the body carries the error
    assert RESOURCE_NOT_FOUND_2025_11_25 == -32002
    not_found = exceptions.ResourceNotFound(data={"uri": "a:b"}, code=RESOURCE_NOT_FOUND_2025_11_25)
    assert not_found.to_error() == {"code": -32002, "message": "Resource not found", "data": {"uri": "a:b"}}
    assert exceptions.ResourceNotFound().code == INVALID_PARAMS  # the code of 2026-07-28
    assert exceptions.HeaderMismatch().code == -32020
    assert exceptions.UnsupportedProtocolVersion().code == -32022
    for cls in (ParseError, InvalidRequest, InvalidParams, exceptions.MethodNotFound, exceptions.InternalError):
        assert issubclass(cls, MCPError)


def test_error_serialization_with_data_and_id():
    error = InvalidParams("Resource not found", data={"uri": "a:b"}, request_id="r")
    assert error.to_response() == {
        "jsonrpc": "2.0",
        "id": "r",
        "error": {"code": -32602, "message": "Resource not found", "data": {"uri": "a:b"}},
    }


def test_error_without_data_omits_data_and_uses_default_message():
    error = exceptions.MethodNotFound()
    assert error.to_error() == {"code": -32601, "message": "Method not found"}
    assert str(error) == "Method not found"
    assert not error.has_id


def test_with_id_fills_a_missing_id_but_keeps_a_known_one():
    assert exceptions.MethodNotFound().with_id(12).to_response()["id"] == 12
    known = InvalidParams(request_id=None).with_id(12)
    assert known.to_response()["id"] is None
    assert InvalidParams(request_id="a").with_id("b").request_id == "a"


def test_id_zero_is_kept_in_errors():
    error = refused(body({"jsonrpc": "2.0", "id": 0, "method": 5}))
    assert error.to_response()["id"] == 0


def test_result_response():
    assert result_response(3, {"a": 1}) == {"jsonrpc": "2.0", "id": 3, "result": {"a": 1}}


def test_dumps_is_compact_utf8():
    encoded = dumps({"message": "héllo ✓", "list": [1, 2], "nested": {"a": None}})
    assert isinstance(encoded, bytes)
    assert encoded == '{"message":"héllo ✓","list":[1,2],"nested":{"a":null}}'.encode()
    assert b" " not in dumps({"a": [1, {"b": 2}]})


def test_dumps_refuses_nan():
    with pytest.raises(ValueError):
        dumps({"n": math.nan})


def test_dumps_answers_a_lone_surrogate_id_echoed_from_the_request():
    # "\ud800" is a legal JSON escape, so it parses; echoing it must not crash the response.
    message = parse_message(b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}')
    encoded = dumps(result_response(message.id, {}))
    encoded.decode("utf-8")  # valid UTF-8
    assert json.loads(encoded)["id"] == "\ud800"


def test_dumps_escapes_only_the_lone_surrogates():
    assert dumps({"a": "\ud800é漢", "b": ["\udfff", "😀"]}) == '{"a":"\\ud800é漢","b":["\\udfff","😀"]}'.encode()


def test_dumps_round_trips_through_parse():
    payload = {"jsonrpc": "2.0", "id": "é", "method": "resources/read", "params": {"uri": "a://ü"}}
    message = parse_message(dumps(payload))
    assert message.id == "é"
    assert message.params == {"uri": "a://ü"}


# Properties -------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
        "method": st.sampled_from(["ping", "resources/read", ""]) | json_values,
        "params": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
        "result": json_values,
        "error": json_values,
        "Params": json_values,
    },
)


def _parse_or_mcp_error(raw: bytes) -> Message | None:
    try:
        return parse_message(raw)
    except MCPError as exc:
        # Every failure must also serialize.
        json.loads(dumps(exc.to_response()))
        return None


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_parse_message_only_raises_mcp_errors_on_arbitrary_bytes(raw):
    _parse_or_mcp_error(raw)


@settings(max_examples=300)
@given(json_values)
def test_parse_message_only_raises_mcp_errors_on_arbitrary_json(value):
    _parse_or_mcp_error(json.dumps(value).encode())


@settings(max_examples=300)
@given(message_like)
def test_parse_message_only_raises_mcp_errors_on_message_like_objects(value):
    message = _parse_or_mcp_error(json.dumps(value).encode())
    if message is not None and not message.is_response:
        # Whatever is accepted is well formed.
        assert isinstance(message.method, str)
        assert message.method
        assert isinstance(message.params, dict)
        assert message.id is None or (isinstance(message.id, int | str) and not isinstance(message.id, bool))
        assert message.is_notification == ("id" not in value)


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(plain_values)
def test_dumps_plain_is_byte_for_byte_dumps(value):
    # Lone surrogates and integers over 64 bits included: orjson refuses them and dumps answers.
    assert dumps_plain(value) == dumps(value)


def test_dumps_plain_falls_back_for_what_orjson_refuses():
    assert dumps_plain({"id": 2**70}) == b'{"id":1180591620717411303424}'
    assert dumps_plain({"name": "\ud800"}) == dumps({"name": "\ud800"})
    assert dumps_plain({1: "a"}) == b'{"1":"a"}'
