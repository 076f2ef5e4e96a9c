"""The peer for item 5: the official MCP Python SDK's low-level ``Server`` serving the same page, behind the same
bearer token.

``python sdk_server.py CONFIG.json PORT`` serves ``resources/list`` with a handler that runs the same SQL the
Django ORM emits for our page (captured by ``bench_http.py`` into CONFIG), bound to the position carried by a
plain ``"<created>|<id>"`` cursor, on one synchronous driver connection (psycopg or sqlite3), and returns the
page as SDK ``Resource`` models with a next cursor. The app is ``streamable_http_app(json_response=True,
stateless_http=True)`` under uvicorn, one process.

Every request is authenticated through the SDK's own auth (``auth=AuthSettings(...)``,
``token_verifier=DjangoOAuthToolkitVerifier``): the verifier looks the bearer token up in django-oauth-toolkit's
tables on every request, as django-oauth-toolkit's validator does for ours (SHA-256 of the token, the
``oauth2_provider_accesstoken`` row by ``token_checksum`` joined to its application and its user, expiry checked,
an inactive user refused) on the same connection as the page query, and returns an ``AccessToken`` with the
token's scopes, the resource it was issued for (RFC 8707: the entry of its ``resource`` list equal to the server's
canonical URI) and the user as subject. The SDK then refuses a token issued for another resource
(``validate_token_resource``) or without the ``documents:read`` scope (``required_scopes``), answering 401/403.
No cache: like ours with ``TOKEN_CACHE_TTL_SECONDS`` 0, the row is read for every request.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server

TOKEN_SQL = (
    "SELECT t.expires, t.scope, t.resource, a.client_id, t.user_id, u.is_active "
    "FROM oauth2_provider_accesstoken t "
    "JOIN oauth2_provider_application a ON a.id = t.application_id "
    "LEFT JOIN auth_user u ON u.id = t.user_id "
    "WHERE t.token_checksum = %s"
)


class DjangoOAuthToolkitVerifier:
    """The SDK's ``TokenVerifier`` protocol over django-oauth-toolkit's access token table."""

    def __init__(self, conn: Any, vendor: str, resource: str) -> None:
        self.conn = conn
        self.sql = TOKEN_SQL if vendor == "postgresql" else TOKEN_SQL.replace("%s", "?")
        self.vendor = vendor
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        row = self.conn.execute(self.sql, [checksum]).fetchone()
        if row is None:
            return None
        expires, scope, resource, client_id, user_id, is_active = row
        if isinstance(expires, str):  # SQLite
            expires = datetime.fromisoformat(expires)
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        if expires.timestamp() <= time.time():
            return None
        if user_id is not None and not is_active:
            return None
        resources = json.loads(resource) if isinstance(resource, str) else resource or []
        return AccessToken(
            token=token,
            client_id=client_id,
            scopes=(scope or "").split(),
            expires_at=int(expires.timestamp()),
            resource=self.resource if self.resource in resources else (resources[0] if resources else None),
            subject=None if user_id is None else str(user_id),
        )


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
    resource = config["resource"]
    auth = AuthSettings(
        issuer_url=config["issuer"],
        resource_server_url=resource,
        required_scopes=["documents:read"],
        validate_token_resource=True,
    )
    verifier = DjangoOAuthToolkitVerifier(conn, vendor, resource)
    return server.streamable_http_app(json_response=True, stateless_http=True, auth=auth, token_verifier=verifier)


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
