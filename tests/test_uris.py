"""Pure unit tests of RFC 6570 level-1 URI templates (no database, no Django)."""

from __future__ import annotations

import string
from urllib.parse import unquote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcp_resources.protocol.uris import (
    MAX_URI_LENGTH,
    Literal,
    TemplateError,
    URITemplate,
    Variable,
    can_start_with,
    compile_template,
    templates_overlap,
    validate_uri,
)

UNRESERVED = string.ascii_letters + string.digits + "-._~"
RESERVED = ":/?#[]@!$&'()*+,;="

# compile ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "parts"),
    [
        ("learn://documents/{id}", (Literal("learn://documents/"), Variable("id", False))),
        ("a://x/{id}/data", (Literal("a://x/"), Variable("id", False), Literal("/data"))),
        ("file:///{+path}", (Literal("file:///"), Variable("path", True))),
        ("a://{x}.json", (Literal("a://"), Variable("x", False), Literal(".json"))),
        (
            "a://x/{a}-{b}",
            (Literal("a://x/"), Variable("a", False), Literal("-"), Variable("b", False)),
        ),
        ("a://x/{var_1}", (Literal("a://x/"), Variable("var_1", False))),
        ("a://x/{a.b}", (Literal("a://x/"), Variable("a.b", False))),
        ("a://x/{%41b}", (Literal("a://x/"), Variable("%41b", False))),
        ("a://static", (Literal("a://static"),)),
        ("urn:isbn:{n}", (Literal("urn:isbn:"), Variable("n", False))),
        ("git+ssh://h/{p}", (Literal("git+ssh://h/"), Variable("p", False))),
    ],
)
def test_compile_valid_templates(template, parts):
    compiled = compile_template(template)
    assert isinstance(compiled, URITemplate)
    assert compiled.parts == parts
    assert str(compiled) == template
    assert compiled.variables == tuple(p.name for p in parts if isinstance(p, Variable))


@pytest.mark.parametrize(
    "template",
    [
        "a://x{?q}",
        "a://x{&q}",
        "a://x/{#frag}",
        "a://x{/seg}",
        "a://x{.ext}",
        "a://x{;p}",
        "a://x/{=x}",
        "a://x/{,x}",
        "a://x/{!x}",
        "a://x/{@x}",
        "a://x/{|x}",
        "a://x/{x*}",
        "a://x/{x:3}",
        "a://x/{a,b}",
        "a://x/{}",
        "a://x/{+}",
        "a://x/{++x}",
        "a://x/{.a}",
        "a://x/{a.}",
        "a://x/{a..b}",
        "a://x/{%4}",
        "a://x/{é}",
    ],
)
def test_compile_refuses_operators_and_bad_names(template):
    with pytest.raises(TemplateError):
        compile_template(template)


def test_compile_refuses_duplicate_variables():
    with pytest.raises(TemplateError, match="twice"):
        compile_template("a://{x}/y/{x}")
    with pytest.raises(TemplateError, match="twice"):
        compile_template("a://{x}/y/{+x}")


@pytest.mark.parametrize("template", ["a://{x}{y}", "a://p/{+x}{y}", "a://{x}{+y}/z"])
def test_compile_refuses_adjacent_variables(template):
    with pytest.raises(TemplateError, match="separated"):
        compile_template(template)


@pytest.mark.parametrize("template", ["a://{x", "a://x}", "a://{{x}}", "a://{x}}", "a://}{x}", "a://{x{y}}"])
def test_compile_refuses_unbalanced_braces(template):
    with pytest.raises(TemplateError):
        compile_template(template)


@pytest.mark.parametrize(
    "template",
    ["documents/{id}", "{scheme}://x", "{+rest}", "//host/{id}", "1a://x/{id}", "a{x}://y", ":x/{id}", "x"],
)
def test_compile_refuses_templates_without_a_scheme(template):
    with pytest.raises(TemplateError, match="scheme"):
        compile_template(template)


@pytest.mark.parametrize("template", ["a://x /{id}", "a://x/{id}\n", "a://\tx/{id}", "a://x/{ id}", "a://x\u00a0y"])
def test_compile_refuses_whitespace(template):
    with pytest.raises(TemplateError, match="whitespace"):
        compile_template(template)


@pytest.mark.parametrize("template", ["", None, 12, b"a://x"])
def test_compile_refuses_non_strings_and_empty(template):
    with pytest.raises(TemplateError):
        compile_template(template)


def test_compile_refuses_overlong_templates():
    compile_template("a://" + "x" * (MAX_URI_LENGTH - 4))
    with pytest.raises(TemplateError):
        compile_template("a://" + "x" * (MAX_URI_LENGTH - 3))


def test_template_error_is_a_value_error():
    assert issubclass(TemplateError, ValueError)


# match ------------------------------------------------------------------------------------------------------


def test_match_simple_variable():
    t = compile_template("learn://documents/{id}")
    assert t.match("learn://documents/42") == {"id": "42"}
    assert t.match("learn://documents/") is None
    assert t.match("learn://documents/42/") is None
    assert t.match("learn://documents/4/2") is None
    assert t.match("learn://documents/42?x=1") is None
    assert t.match("learn://documents/42#f") is None
    assert t.match("xlearn://documents/42") is None
    assert t.match("learn://document/42") is None
    assert t.match("learn://documents/4 2") is None


def test_match_with_literal_suffix():
    t = compile_template("test://template/{id}/data")
    assert t.match("test://template/abc/data") == {"id": "abc"}
    assert t.match("test://template/abc/datum") is None
    assert t.match("test://template//data") is None


def test_match_reserved_variable_spans_reserved_characters():
    t = compile_template("a://files/{+path}")
    assert t.match("a://files/dir/sub/file.txt?x=1#y") == {"path": "dir/sub/file.txt?x=1#y"}
    assert t.match("a://files/a b") is None
    assert t.match("a://files/a{b}") is None
    # {+var} values are returned as written: an escaped slash stays distinct from a real one.
    assert t.match("a://files/a%2Fb") == {"path": "a%2Fb"}


def test_match_static_template():
    t = compile_template("a://static")
    assert t.is_static
    assert t.match("a://static") == {}
    assert t.match("a://static/") is None


def test_match_two_variables_is_greedy_like_a_regex():
    t = compile_template("a://x/{a}-{b}")
    assert t.match("a://x/1-2") == {"a": "1", "b": "2"}
    assert t.match("a://x/1-2-3") == {"a": "1-2", "b": "3"}
    assert t.match("a://x/1-") is None
    assert t.match("a://x/-1") is None


def test_match_decodes_percent_escapes():
    t = compile_template("a://x/{name}")
    assert t.match("a://x/hello%20world") == {"name": "hello world"}
    assert t.match("a://x/%E2%9C%93") == {"name": "✓"}
    assert t.match("a://x/a%2Fb") == {"name": "a/b"}
    assert t.match("a://x/%25") == {"name": "%"}
    # Non-ASCII characters (IRIs) are accepted as they are.
    assert t.match("a://x/é") == {"name": "é"}


@pytest.mark.parametrize("uri", ["a://x/%FF", "a://x/%C3", "a://x/a%ED%A0%80"])
def test_match_with_percent_escapes_that_are_not_utf8_does_not_match(uri):
    t = compile_template("a://x/{name}")
    assert t.match(uri) is None
    t2 = compile_template("a://x/{name}-{other}")
    assert t2.match(uri + "-1") is None


def test_match_refuses_uris_longer_than_max():
    t = compile_template("a://x/{+rest}")
    at_limit = "a://x/" + "y" * (MAX_URI_LENGTH - 6)
    assert t.match(at_limit) == {"rest": "y" * (MAX_URI_LENGTH - 6)}
    assert t.match(at_limit + "y") is None


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("a://x/{a}-{b}-{c}", "a://x/" + "-" * 2030 + "!"),
        ("a://x/{a}-{b}-{c}-{d}", "a://x/" + "1-" * 1015 + "!"),
        ("a://{+a}/{+b}/{+c}", "a://" + "/" * 2040 + " "),
        ("a://{+a}/{+b}/{+c}/{+d}/{+e}", "a://" + "/a" * 1020 + "}"),
        ("a://x/{id}", "a://x/" + "1" * 2040 + "/"),
        ("a://x/{a}.{b}.{c}", "a://x/" + "." * 2040 + "/"),
    ],
)
def test_match_on_long_hostile_input_returns(template, uri):
    # These inputs take O(n**k) steps in a backtracking matcher (minutes for k >= 3); the matcher must not.
    assert len(uri) <= MAX_URI_LENGTH
    assert compile_template(template).match(uri) is None


def test_match_long_valid_input_with_many_variables():
    t = compile_template("a://{+a}/{+b}/{+c}")
    uri = "a://" + "/" * 2000 + "x/y/z"
    assert t.match(uri) == {"a": "/" * 2000 + "x", "b": "y", "c": "z"}


_small_alphabet = st.text(alphabet="ab-/.%2F", min_size=0, max_size=12)


@settings(max_examples=400)
@given(
    st.sampled_from(
        [
            "a://x/{a}-{b}",
            "a://x/{a}-{b}-{c}",
            "a://{+a}/{+b}",
            "a://{+a}/{b}.{+c}",
            "a://x/{a}.{b}/{+c}",
            "a://x/{a}/{b}",
        ]
    ),
    _small_alphabet,
)
def test_match_agrees_with_the_backtracking_regex(template, tail):
    t = compile_template(template)
    uri = t.literal_prefix + tail
    expected = t.regex.fullmatch(uri)
    result = t.match(uri)
    if expected is None:
        assert result is None
        return
    variables = [p for p in t.parts if isinstance(p, Variable)]
    try:
        decoded = {
            p.name: expected.group(i + 1) if p.reserved else unquote(expected.group(i + 1), errors="strict")
            for i, p in enumerate(variables)
        }
    except UnicodeDecodeError:
        assert result is None
        return
    assert result == decoded


# expand -----------------------------------------------------------------------------------------------------


def test_expand_percent_encodes_simple_variables():
    t = compile_template("a://x/{name}")
    assert t.expand({"name": "hello world/ü?"}) == "a://x/hello%20world%2F%C3%BC%3F"
    assert t.expand({"name": 42}) == "a://x/42"
    assert t.expand({"name": "a-b.c_d~e"}) == "a://x/a-b.c_d~e"
    assert t.expand({"name": "100%"}) == "a://x/100%25"


def test_expand_reserved_variables_keep_reserved_characters():
    t = compile_template("a://x/{+path}")
    assert t.expand({"path": "dir/sub?x=1#f"}) == "a://x/dir/sub?x=1#f"
    assert t.expand({"path": "a b"}) == "a://x/a%20b"


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_an_integer_expands_as_its_text_would(number):
    template = compile_template("learn://documents/{id}/{+rest}")
    assert template.expand({"id": number, "rest": number}) == template.expand({"id": str(number), "rest": str(number)})


def test_expand_missing_variable_raises_key_error():
    t = compile_template("a://x/{a}-{b}")
    with pytest.raises(KeyError):
        t.expand({"a": "1"})


@settings(max_examples=300)
@given(st.text(min_size=1, max_size=300))
def test_expand_then_match_round_trips_simple_variables(value):
    t = compile_template("a://x/{value}/data")
    uri = t.expand({"value": value})
    assume(len(uri) <= MAX_URI_LENGTH)
    assert validate_uri(uri) == uri
    assert t.match(uri) == {"value": value}


@settings(max_examples=300)
@given(st.text(alphabet=UNRESERVED + RESERVED, min_size=1, max_size=200))
def test_expand_then_match_round_trips_reserved_variables(value):
    t = compile_template("a://files/{+path}")
    uri = t.expand({"path": value})
    assert uri == "a://files/" + value  # reserved characters are kept as they are
    assert t.match(uri) == {"path": value}


@settings(max_examples=200)
@given(st.text(alphabet=UNRESERVED + "é/ ", min_size=1, max_size=20), st.integers(min_value=0, max_value=10**12))
def test_expand_then_match_round_trips_two_variables(name, number):
    t = compile_template("a://users/{name}/items/{n}")
    assert t.match(t.expand({"name": name, "n": number})) == {"name": name, "n": str(number)}


# literal prefix ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "prefix"),
    [
        ("learn://documents/{id}", "learn://documents/"),
        ("a://x/{a}-{b}", "a://x/"),
        ("a://{+rest}", "a://"),
        ("a://static/thing", "a://static/thing"),
        ("a://x{y}/z", "a://x"),
    ],
)
def test_literal_prefix(template, prefix):
    assert compile_template(template).literal_prefix == prefix


# overlap ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("a://x/{id}", "a://x/{id}/data", False),
        ("a://x/{id}", "a://{+rest}", True),
        ("a://{x}.json", "a://{y}.txt", False),
        ("a://x/{a}-{b}", "a://x/{c}", True),
        ("a://x/{id}", "a://x/{other}", True),
        ("a://x/{id}", "b://x/{id}", False),
        ("a://x/{id}", "a://x/{+path}", True),
        ("a://x/{id}", "a://x/literal", True),
        ("a://x/{id}", "a://x/lit/eral", False),
        ("a://x/{id}", "a://y/{id}", False),
        ("a://static", "a://static", True),
        ("a://static", "a://other", False),
        ("a://{+a}.json", "a://{+b}/x", False),
        ("a://x/{id}.json", "a://x/{+id}", True),
        ("a://{x}", "a://{y}?q", False),
        ("a://{+x}", "a://{y}?q", True),
        ("learn://documents/{id}", "test://template/{id}/data", False),
    ],
)
def test_templates_overlap(a, b, expected):
    ta, tb = compile_template(a), compile_template(b)
    assert templates_overlap(ta, tb) is expected
    assert templates_overlap(tb, ta) is expected


@settings(max_examples=200)
@given(
    st.sampled_from(["a://x/{id}", "a://{+rest}", "a://x/{a}-{b}", "a://{x}.json", "a://x/{id}/data"]),
    st.sampled_from(["a://x/{c}", "a://{y}.txt", "a://x/lit", "a://{+p}/x", "a://x/1-2"]),
    st.text(alphabet="ax/-.1jsontx", max_size=10),
)
def test_a_uri_matching_both_templates_implies_overlap(a, b, tail):
    ta, tb = compile_template(a), compile_template(b)
    uri = "a://" + tail
    if ta.match(uri) is not None and tb.match(uri) is not None:
        assert templates_overlap(ta, tb)


# can_start_with ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "prefix", "expected"),
    [
        ("learn://documents/{id}", "", True),
        ("learn://documents/{id}", "learn://", True),
        ("learn://documents/{id}", "learn://documents/", True),
        ("learn://documents/{id}", "learn://documents/12", True),
        ("learn://documents/{id}", "learn://docs", False),
        ("learn://documents/{id}", "test://", False),
        ("learn://documents/{id}", "learn://documents-x", False),
        ("a://static", "a://st", True),
        ("a://static", "a://static", True),
        ("a://static", "a://static/more", False),
        ("a://static", "b://", False),
    ],
)
def test_can_start_with(template, prefix, expected):
    assert can_start_with(compile_template(template), prefix) is expected


@settings(max_examples=200)
@given(st.text(alphabet="ab/:-1", max_size=8), st.integers(min_value=0, max_value=30))
def test_can_start_with_never_excludes_a_matching_uri(value, cut):
    t = compile_template("a://b/{x}-{+y}")
    uri = "a://b/" + value
    if t.match(uri) is not None:
        assert can_start_with(t, uri[:cut])


# validate_uri -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["learn://documents/1", "urn:isbn:123", "https://example.com/a?b#c", "a:", "file:///é"])
def test_validate_uri_accepts(uri):
    assert validate_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "",
        None,
        12,
        b"a://x",
        "no-scheme",
        "/path",
        "1a://x",
        "://x",
        "a://x\ny",
        "a://x\x00",
        "a://x\x7f",
        "a://x\ty",
        "a://x/\ud800",
        "a://x/\udfff-y",
        "a://" + "x" * (MAX_URI_LENGTH - 3),
    ],
)
def test_validate_uri_refuses(uri):
    with pytest.raises(ValueError):
        validate_uri(uri)


def test_validate_uri_length_limit_is_inclusive():
    uri = "a://" + "x" * (MAX_URI_LENGTH - 4)
    assert validate_uri(uri) == uri
