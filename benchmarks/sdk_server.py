"""The peer for item 5: the official MCP Python SDK's low-level ``Server`` serving the same page.

``python sdk_server.py CONFIG.json PORT`` serves ``resources/list`` with a handler that runs the same SQL the
Django ORM emits for our page (captured by ``bench_http.py`` into CONFIG), bound to the position carried by a
plain ``"<created>|<id>"`` cursor, on one synchronous driver connection (psycopg or sqlite3), and returns the
page as SDK ``Resource`` models with a next cursor. The app is ``streamable_http_app(json_response=True,
stateless_http=True)`` under uvicorn, one process. No authentication: the SDK server does not need it to serve
this page, so the comparison charges ours for its bearer-token check (see docs/benchmarks.md).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server


def make_app(config: dict[str, Any]) -> Any:
    sql: str = config["sql"]
    spec: list[list[Any]] = config["params"]
    page_size: int = config["page_size"]
    vendor: str = config["vendor"]
    if vendor == "postgresql":
        import psycopg

        conn: Any = psycopg.connect(config["dsn"], autocommit=True)
    else:
        import sqlite3

        conn = sqlite3.connect(config["sqlite_path"], check_same_thread=False)
        sql = sql.replace("%s", "?")
    columns = [
        d[0] for d in conn.execute(sql, bind(spec, config["probe_created"], config["probe_id"], vendor)).description
    ]
    id_col, title_col, created_col = columns.index("id"), columns.index("title"), columns.index("created")

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        created, last_id = cursor.rsplit("|", 1) if cursor else (config["probe_created"], "0")
        rows = conn.execute(sql, bind(spec, created, int(last_id), vendor)).fetchall()
        resources = [
            types.Resource(uri=f"learn://documents/{row[id_col]}", name=row[title_col], mime_type="text/plain")
            for row in rows[:page_size]
        ]
        next_cursor = None
        if len(rows) > page_size:
            last = rows[page_size - 1]
            stamp = last[created_col]
            next_cursor = f"{stamp.isoformat() if isinstance(stamp, datetime) else stamp}|{last[id_col]}"
        return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    server = Server("bench-sdk-lowlevel", on_list_resources=list_resources)
    return server.streamable_http_app(json_response=True, stateless_http=True)


def bind(spec: list[list[Any]], created: str, last_id: int, vendor: str) -> list[Any]:
    """The captured parameters with the position's values put back in their places."""
    value: Any = datetime.fromisoformat(created) if vendor == "postgresql" else created
    out = []
    for kind, const in spec:
        out.append(value if kind == "created" else last_id if kind == "id" else const)
    return out


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    port = int(sys.argv[2])
    uvicorn.run(make_app(config), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
