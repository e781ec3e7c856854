"""Adding, syncing and removing a person's MCP connections: what the API, the console and the admin call."""

import json
import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts import audit
from accounts.models import AuditKind
from accounts.services import lock_account
from connections import client, crypto
from connections.addresses import RefusedUrl, check_resolved, check_url
from connections.checks import check_slot
from connections.models import Connection, Tool
from ops.signals import asker_gone

logger = logging.getLogger(__name__)

MAX_NAME_LENGTH = 100
MAX_API_KEY_LENGTH = 4096
MAX_CONNECTIONS = 20  # per person


class ConnectionRefused(Exception):
    """The connection cannot be added or synced; the text says what failed. ``oauth`` when the server wants a key."""

    def __init__(self, message: str, *, authentication: bool = False) -> None:
        super().__init__(message)
        self.authentication = authentication


@dataclass(frozen=True, slots=True)
class NewConnection:
    name: str
    server_url: str
    api_key: str


def validate(name: object, server_url: object, api_key: object) -> NewConnection:
    if not isinstance(name, str) or not name.strip():
        raise ConnectionRefused('"name" must be a non-blank string, for example "GitHub tools".')
    if len(name.strip()) > MAX_NAME_LENGTH:
        raise ConnectionRefused(f'"name" is longer than {MAX_NAME_LENGTH} characters.')
    if not isinstance(server_url, str) or not server_url.strip():
        raise ConnectionRefused(
            '"serverUrl" must be the MCP server\'s http(s) URL, for example https://example.com/mcp.'
        )
    if api_key is not None and not isinstance(api_key, str):
        raise ConnectionRefused('"apiKey", when sent, must be a string.')
    key = (api_key or "").strip()
    if len(key) > MAX_API_KEY_LENGTH or any(not ch.isprintable() for ch in key):
        raise ConnectionRefused(f'"apiKey" must be printable text of at most {MAX_API_KEY_LENGTH} characters.')
    try:
        url = check_url(server_url)
        check_resolved(url)
    except RefusedUrl as refused:
        raise ConnectionRefused(str(refused)) from None
    return NewConnection(name=" ".join(name.split()), server_url=url, api_key=key)


def _read_server(owner_id: int, url: str, api_key: str) -> client.ServerInfo:
    """initialize + tools/list while the person waits: in one of the bounded check slots (connections/checks.py,
    ChecksBusy when none is free) and within MCP_CHECK_TIMEOUT_SECONDS."""
    try:
        with check_slot(owner_id):
            info = client.list_tools(url, api_key, timeout=settings.MCP_CHECK_TIMEOUT_SECONDS)
    except client.AuthenticationRequired as refused:
        raise ConnectionRefused(str(refused), authentication=True) from None
    except client.McpError as failed:
        raise ConnectionRefused(str(failed)) from None
    return info


def check_room(owner: User) -> None:
    """Refuse when the owner holds MAX_CONNECTIONS already. Early, before connecting, as a courtesy; add_connection
    checks again with the owner's row locked, where it counts."""
    if Connection.objects.filter(owner=owner).count() >= MAX_CONNECTIONS:
        raise ConnectionRefused(f"You have {MAX_CONNECTIONS} MCP connections, the most allowed; remove one first.")


def add_connection(
    owner: User, name: object, server_url: object, api_key: object = None, *, by: str = audit.COMMAND
) -> Connection:
    """Check the URL, connect (initialize + tools/list; ChecksBusy when too many checks run), then store the
    connection, its key encrypted, and its tools. Nothing is stored when the server cannot be used."""
    check_room(owner)
    new = validate(name, server_url, api_key)
    info = _read_server(owner.pk, new.server_url, new.api_key)
    with transaction.atomic():
        # The server was read meanwhile (seconds): other adds for the owner may have been stored since the first
        # check. Locked, two adds cannot both count 19 and store the twentieth and twenty-first.
        lock_account(owner)
        check_room(owner)
        connection = Connection.objects.create(
            owner=owner,
            name=new.name,
            server_url=new.server_url,
            api_key_encrypted=crypto.encrypt(new.api_key),
            server_name=_storable(info.name)[:200],
            server_version=_storable(info.version)[:100],
            last_synced_at=timezone.now(),
        )
        _store_tools(connection, info.tools)
        summary = f"MCP server “{connection.name}” at {connection.server_url} ({len(info.tools)} tools)"
        audit.record(owner, AuditKind.CONNECTION_ADDED, summary, by=by)
    logger.info("mcp connection %s added for user %s with %s tools", connection.public_id, owner.pk, len(info.tools))
    return connection


def sync_tools(connection: Connection) -> Connection:
    """Read the server's tools again and replace the stored ones. A failure is kept as the connection's last error
    (and raised); the tools of the last good sync stay."""
    try:
        info = _read_server(connection.owner_id, connection.server_url, crypto.decrypt(connection.api_key_encrypted))
    except crypto.UnreadableSecret as unreadable:
        raise ConnectionRefused(str(unreadable)) from None
    except ConnectionRefused as refused:
        Connection.objects.filter(pk=connection.pk).update(last_error=str(refused))
        raise
    with transaction.atomic():
        connection.server_name = _storable(info.name)[:200]
        connection.server_version = _storable(info.version)[:100]
        connection.last_synced_at = timezone.now()
        connection.last_error = ""
        connection.save(update_fields=["server_name", "server_version", "last_synced_at", "last_error"])
        connection.tools.all().delete()
        _store_tools(connection, info.tools)
    return connection


def _storable(text: str) -> str:
    """Text a database column takes: no NUL (PostgreSQL refuses it), no lone surrogate (it has no UTF-8)."""
    return text.replace("\x00", "").encode("utf-8", errors="replace").decode("utf-8")


def _store_tools(connection: Connection, tools: list[client.ToolInfo]) -> None:
    seen: set[str] = set()
    rows = []
    for tool in tools:
        if tool.name in seen or not tool.name or len(tool.name) > 255 or _storable(tool.name) != tool.name:
            continue  # a name we could not call it by again
        schema = json.loads(_storable(json.dumps(tool.input_schema).replace("\\u0000", "")))
        seen.add(tool.name)
        rows.append(
            Tool(
                connection=connection,
                name=tool.name,
                title=_storable(tool.title)[:255],
                description=_storable(tool.description)[:10_000],
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
                read_only=tool.read_only,
            )
        )
    Tool.objects.bulk_create(rows)


def remove_connection(connection: Connection, *, by: str = audit.COMMAND) -> None:
    with transaction.atomic():
        # Before the delete, which unlinks its calls: the requests it led to die with it (assistant/approvals.py).
        asker_gone.send(Connection, connection=connection, why=f"the connection “{connection.name}” was removed")
        connection.delete()
        summary = f"MCP server “{connection.name}” at {connection.server_url}"
        audit.record(connection.owner_id, AuditKind.CONNECTION_REMOVED, summary, by=by)
    logger.info("mcp connection %s removed", connection.public_id)


def api_key_of(connection: Connection) -> str:
    return crypto.decrypt(connection.api_key_encrypted)
