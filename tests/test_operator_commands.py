"""``mcp_list`` and ``mcp_read``: the operator's view of a user's resources, through the same server core as HTTP.

The demo project's registry (``learn://documents/{id}``, ``learn://notes/{id}`` and ``learn://bookmarks/{slug}``,
scope ``documents:read``) and ``load_demo_data`` (alice: 120 documents, bob: 60, 10 notes and 8 bookmarks each;
two admin static resources), plus the conformance app's code-registered static resources.
"""

from __future__ import annotations

import base64
import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from mcp_resources.models import StaticResource
from mcp_resources.registries import registry
from testproject.library.management.commands.load_demo_data import PNG
from testproject.library.models import Bookmark, Document, Note
from tests.listing_support import document_uri, expected_documents, expected_notes, handbook_uris, note_uri

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db) -> dict[str, Any]:
    call_command("load_demo_data", stdout=StringIO())
    users = get_user_model().objects
    return {"alice": users.get(username="alice"), "bob": users.get(username="bob")}


def run(command: str, *args: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(command, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def listed_uris(output: str) -> list[str]:
    return [line.split("\t", 1)[0] for line in output.splitlines() if line]


def json_documents(output: str) -> list[dict[str, Any]]:
    decoder, documents, index = json.JSONDecoder(), [], 0
    while index < len(output):
        if output[index].isspace():
            index += 1
            continue
        document, index = decoder.raw_decode(output, index)
        documents.append(document)
    return documents


def statics() -> list[str]:
    code = [r.uri for r in registry.iter_resources()]
    admin = list(StaticResource.objects.filter(enabled=True).values_list("uri", flat=True))
    return sorted(set(code) | set(admin), key=str.encode)


def expected_bookmarks(owner: Any) -> list[str]:
    """The owner's bookmarks in the listing order: slug, in byte order."""
    slugs = Bookmark.objects.filter(owner=owner).values_list("slug", flat=True)
    return [f"learn://bookmarks/{slug}" for slug in sorted(slugs, key=str.encode)]


def inventory(user: Any) -> list[str]:
    return statics() + expected_documents(user) + expected_notes(user) + expected_bookmarks(user) + handbook_uris()


# mcp_list --------------------------------------------------------------------------------------------------


def test_demo_data_spans_several_pages_and_both_sources(demo):
    assert Document.objects.filter(owner=demo["alice"]).count() == 120
    assert Document.objects.filter(owner=demo["bob"]).count() == 60
    assert Note.objects.filter(owner=demo["alice"]).count() == 10


def test_mcp_list_prints_the_first_page_and_the_next_cursor(demo):
    out, err = run("mcp_list", user="alice")
    lines = out.splitlines()
    assert len(lines) == 50
    assert listed_uris(out) == inventory(demo["alice"])[:50]
    first_doc = Document.objects.filter(owner=demo["alice"]).order_by("created", "id").first()
    assert f"{document_uri(first_doc)}\t{first_doc.title}" in lines
    assert err.startswith("next cursor: ")


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_mcp_list_all_follows_every_cursor(demo, user):
    out, err = run("mcp_list", user=user, all=True)
    assert listed_uris(out) == inventory(demo[user])
    assert len(listed_uris(out)) == len(statics()) + (120 if user == "alice" else 60) + 10 + 8 + len(handbook_uris())
    assert err == ""
    other = demo["bob" if user == "alice" else "alice"]
    assert not set(listed_uris(out)) & set(
        expected_documents(other) + expected_notes(other) + expected_bookmarks(other)
    )


def test_mcp_list_continues_from_a_cursor(demo):
    _, err = run("mcp_list", user="alice")
    cursor = err.split("next cursor: ", 1)[1].strip()
    out, _ = run("mcp_list", user="alice", cursor=cursor)
    assert listed_uris(out) == inventory(demo["alice"])[50:100]
    # The cursor is bound to the caller: bob cannot continue alice's traversal.
    with pytest.raises(CommandError, match=r"^Invalid cursor \(-32602\) \{'detail': 'The cursor may come from another"):
        run("mcp_list", user="bob", cursor=cursor)
    # Nor can alice holding other scopes.
    with pytest.raises(CommandError, match=r"Invalid cursor"):
        run("mcp_list", user="alice", cursor=cursor, scope="documents:read other:scope")


def test_mcp_list_prefix(demo):
    out, _ = run("mcp_list", user="alice", prefix="learn://notes/", all=True)
    assert listed_uris(out) == expected_notes(demo["alice"])
    # A partial id: the first digit of one of alice's ids (ids depend on the backend's sequences).
    partial = expected_documents(demo["alice"])[0][: len("learn://documents/") + 1]
    out, _ = run("mcp_list", user="alice", prefix=partial, all=True)
    expected = [u for u in expected_documents(demo["alice"]) if u.startswith(partial)]
    assert listed_uris(out) == expected
    assert expected
    out, _ = run("mcp_list", user="alice", prefix="test://", all=True)
    assert listed_uris(out) == [u for u in statics() if u.startswith("test://")]
    out, err = run("mcp_list", user="alice", prefix="nothing://")
    assert (out, err) == ("", "")


def test_mcp_list_json(demo):
    out, _ = run("mcp_list", user="alice", json=True)
    (page,) = json_documents(out)
    assert [r["uri"] for r in page["resources"]] == inventory(demo["alice"])[:50]
    assert (page["cacheScope"], page["ttlMs"]) == ("private", 0)
    assert "nextCursor" in page
    note = Note.objects.filter(owner=demo["alice"]).order_by("title", "id").first()
    listed_note = {
        "uri": note_uri(note),
        "name": note.title,
        "mimeType": "text/markdown",
        "annotations": {"lastModified": note.updated.isoformat().replace("+00:00", "Z")},
    }
    assert listed_note not in page["resources"]

    out, _ = run("mcp_list", user="alice", json=True, all=True)
    pages = json_documents(out)
    assert [len(p["resources"]) for p in pages] == [50, 50, 50, 43 + len(handbook_uris()) - 50]
    assert [r["uri"] for p in pages for r in p["resources"]] == inventory(demo["alice"])
    assert listed_note in pages[2]["resources"]  # the notes end the third page, bookmarks and the handbook follow
    assert "nextCursor" not in pages[-1]


def test_mcp_list_scope(demo):
    out, _ = run("mcp_list", user="alice", scope="documents:read", all=True)
    assert listed_uris(out) == inventory(demo["alice"])
    for scopes in ("", "profile other:read"):
        with pytest.raises(CommandError, match=r"^insufficient scope: needs documents:read$"):
            run("mcp_list", user="alice", scope=scopes)


def test_mcp_list_unknown_user(demo):
    with pytest.raises(CommandError, match="no user 'mallory'"):
        run("mcp_list", user="mallory")


def test_mcp_list_requires_a_user():
    with pytest.raises(CommandError):
        run("mcp_list")


# mcp_read --------------------------------------------------------------------------------------------------


def test_mcp_read_text_document_and_note(demo):
    doc = Document.objects.filter(owner=demo["alice"]).order_by("created").first()
    out, _ = run("mcp_read", document_uri(doc), user="alice")
    assert out == f"{doc.body}\n"
    assert doc.body == "This is document 1 of alice."
    note = Note.objects.filter(owner=demo["alice"]).first()
    out, _ = run("mcp_read", note_uri(note), user="alice")
    assert out.startswith(f"# {note.title}\n\nA note of alice.")


def test_mcp_read_static_text_and_binary(demo):
    out, _ = run("mcp_read", "learn://about", user="bob")
    assert out.startswith("# django-mcp-resources demo")
    out, _ = run("mcp_read", "learn://logo.png", user="bob")
    assert out == f"<image/png: {len(base64.b64encode(PNG))} base64 characters>\n"
    out, _ = run("mcp_read", "learn://logo.png", user="bob", json=True)
    (content,) = json.loads(out)["contents"]
    assert content["mimeType"] == "image/png"
    assert base64.b64decode(content["blob"]) == PNG


def test_mcp_read_json_of_a_document(demo):
    doc = Document.objects.filter(owner=demo["bob"]).first()
    result = json.loads(run("mcp_read", document_uri(doc), user="bob", json=True)[0])
    assert result["contents"] == [{"uri": document_uri(doc), "text": doc.body, "mimeType": "text/plain"}]
    assert (result["cacheScope"], result["ttlMs"]) == ("private", 0)


def test_mcp_read_missing_resource_is_a_command_error(demo):
    with pytest.raises(CommandError, match=r"^Resource not found \(-32602\)"):
        run("mcp_read", "learn://documents/999999999", user="alice")
    with pytest.raises(CommandError, match=r"^Resource not found"):
        run("mcp_read", "learn://nothing-here", user="alice")
    with pytest.raises(CommandError, match=r"Invalid resource URI"):
        run("mcp_read", "not a uri", user="alice")


def test_mcp_read_of_another_users_record_looks_exactly_like_a_missing_one(demo):
    for model, uri_of in ((Document, document_uri), (Note, note_uri)):
        theirs = uri_of(model.objects.filter(owner=demo["bob"]).first())
        missing = uri_of(999_999_999)
        with pytest.raises(CommandError) as refused:
            run("mcp_read", theirs, user="alice")
        with pytest.raises(CommandError) as absent:
            run("mcp_read", missing, user="alice")
        assert str(refused.value).replace(theirs, "URI") == str(absent.value).replace(missing, "URI")
        assert str(refused.value) == f"Resource not found (-32602) {{'uri': '{theirs}'}}"
        # The owner reads it.
        assert run("mcp_read", theirs, user="bob")[0]


def test_mcp_read_checks_scopes(demo):
    doc = Document.objects.filter(owner=demo["alice"]).first()
    with pytest.raises(CommandError, match=r"^insufficient scope: needs documents:read$"):
        run("mcp_read", document_uri(doc), user="alice", scope="")
    assert run("mcp_read", "learn://about", user="alice", scope="")[0]  # public static resource


def test_mcp_read_unknown_user(demo):
    with pytest.raises(CommandError, match="no user 'mallory'"):
        run("mcp_read", "learn://about", user="mallory")
