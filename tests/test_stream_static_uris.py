"""An open stream's access decision knows the admin's static resources without a query (issue 28's p99).

Before, every update of a template's URI asked the ``StaticResource`` table whether an admin row shadows the URI: a
query per update and caller, about 1 ms of the 2.5 ms a decision took in the delivery benchmark. Now the decisions of
open streams use the enabled rows' URIs kept by :mod:`mcp_resources.server.static_uris`, which the process's log
reader forgets as it reads a ``list_changed`` (a row saved or deleted publishes one, before its ``updated``), and when
a reader starts or reads again after an outage. Every other path queries the table as before.

Through the project's ASGI application in-process (``tests.stream_support``), on the in-memory log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_resources.access import PROTECTED
from mcp_resources.models import StaticResource
from mcp_resources.server import default_server
from mcp_resources.server import static_uris as index
from mcp_resources.server.static_uris import StaticURIs, static_uris
from mcp_resources.subscriptions import broker, notify_resource_updated
from mcp_resources.transport import fanout, streams
from testproject.library.models import Document
from tests.stream_support import ACKNOWLEDGED, Exchange, application, in_thread, listen_body, listen_headers, scope

pytestmark = [pytest.mark.django_db(transaction=True)]

TABLE = StaticResource._meta.db_table


@pytest.fixture(autouse=True)
def forgotten() -> Iterator[None]:
    """Each test starts and ends with the process's index forgotten (another test's rows are gone)."""
    static_uris.forget()
    yield
    static_uris.forget()


def document(owner: Any) -> str:
    return f"learn://documents/{Document.objects.create(owner=owner, title='D', body='b').pk}"


async def listen(token: str, uri: str) -> Exchange:
    stream = Exchange(application(), scope("POST", listen_headers(token)))
    await stream.start(listen_body("static", {"resourceSubscriptions": [uri], "resourcesListChanged": True}))
    assert stream.status == 200, await stream.body()
    assert (await stream.event())["method"] == ACKNOWLEDGED
    return stream


def queries_of_the_table(decide: Callable[[], Any]) -> list[str]:
    """The SQL of ``decide()`` that reads the ``StaticResource`` table, on this thread's connection."""
    with CaptureQueriesContext(connection) as captured:
        decide()
    return [query["sql"] for query in captured.captured_queries if TABLE in query["sql"]]


# The index ---------------------------------------------------------------------------------------------------------


def test_the_rows_are_read_once_and_again_after_forget() -> None:
    kept = StaticURIs()
    StaticResource.objects.create(uri="app://kept", name="kept")
    StaticResource.objects.create(uri="app://off", name="off", enabled=False)
    assert queries_of_the_table(kept.get) != []
    assert kept.get() == frozenset({"app://kept"})
    # Rows written without signals (bulk_create publishes nothing) are not seen until the index is forgotten.
    StaticResource.objects.bulk_create([StaticResource(uri="app://bulk", name="bulk")])
    assert queries_of_the_table(kept.get) == []
    assert kept.get() == frozenset({"app://kept"})
    kept.forget()
    assert kept.get() == frozenset({"app://kept", "app://bulk"})


def test_rows_read_while_they_were_forgotten_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget that lands while the rows are being read (a change published meanwhile) is not undone by them."""
    kept = StaticURIs()
    real_filter = StaticResource.objects.filter

    def filter_then_forget(*args: Any, **kwargs: Any) -> Any:
        kept.forget()
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(StaticResource.objects, "filter", filter_then_forget)
    assert kept.get() == frozenset()
    monkeypatch.undo()
    StaticResource.objects.create(uri="app://later", name="later")
    assert kept.get() == frozenset({"app://later"})


def test_more_rows_than_kept_are_queried_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "MAX_KEPT", 2)
    kept = StaticURIs()
    for n in range(3):
        StaticResource.objects.create(uri=f"app://row-{n}", name="row")
    assert kept.get() is None
    assert queries_of_the_table(kept.get) == []  # "too many" is kept too: no row read again per decision
    assert index.may_be_static("learn://documents/1", None)


def test_a_new_reader_forgets_what_it_may_have_missed() -> None:
    static_uris.get()
    StaticResource.objects.bulk_create([StaticResource(uri="app://unseen", name="unseen")])
    assert static_uris.get() == frozenset()
    fanout.Reader(broker.get_log())  # made, not started
    assert static_uris.get() == frozenset({"app://unseen"})


# Open streams ------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.usefixtures("listening_settings", "no_stream_left_behind")
async def test_an_update_of_a_template_uri_asks_no_row(alice: Any, make_token: Callable[..., str]) -> None:
    """The stream's decision of an update reads no ``StaticResource`` row once the index is kept; a request's
    check of the same URI (no index) still queries the table. Fails on a decision that asks the table each time."""
    target = await in_thread(document, alice)
    stream = await listen(await in_thread(make_token, alice), target)
    (opened,) = [one for one in streams._streams if one.plan.uris == {target}]
    check = opened.plan.check
    assert await in_thread(queries_of_the_table, lambda: fanout.decide([(target, [check])])) != []  # the index read
    decided: list[Any] = []
    asked = await in_thread(queries_of_the_table, lambda: decided.append(fanout.decide([(target, [check])])))
    assert asked == []
    assert decided == [[[True]]]

    def request_check() -> None:
        ctx = check.context()  # as a request's: no index
        assert ctx.static_uris is None
        assert default_server.may_read(target, ctx)

    assert await in_thread(queries_of_the_table, request_check) != []
    await stream.disconnect()


@pytest.mark.anyio
@pytest.mark.usefixtures("listening_settings", "no_stream_left_behind")
async def test_an_admin_row_on_a_listened_uri_decides_from_the_update_it_publishes(
    alice: Any, make_token: Callable[..., str]
) -> None:
    """A protected row saved on the URI of alice's record (scopes her token lacks) shadows the record: its own
    ``updated`` (published after its ``list_changed``) and the next are withheld; deleting the row gives the record
    back. Fails when the index is not forgotten on ``list_changed``, or when the row's ``updated`` comes first."""
    target = await in_thread(document, alice)
    stream = await listen(await in_thread(make_token, alice), target)
    await in_thread(notify_resource_updated, target)
    assert (await stream.event())["method"] == "notifications/resources/updated"
    assert target not in (static_uris.get() or ())  # kept as the stream decided

    def shadow() -> None:
        StaticResource.objects.create(uri=target, name="shadow", access=PROTECTED, required_scopes="admin:only")

    await in_thread(shadow)
    assert (await stream.event())["method"] == "notifications/resources/list_changed"
    await in_thread(notify_resource_updated, target)
    await stream.silent(0.5)  # neither the row's update nor this one: the token lacks admin:only

    await in_thread(lambda: StaticResource.objects.filter(uri=target).delete())
    assert (await stream.event())["method"] == "notifications/resources/list_changed"
    assert (await stream.event())["method"] == "notifications/resources/updated"  # the record's, readable again
    await stream.disconnect()
