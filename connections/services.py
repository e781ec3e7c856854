"""Adding, syncing and removing a person's MCP connections: what the API, the console and the admin call."""

import json
import logging
from collections.abc import Callable
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
from connections.models import Connection, GrantKind, OAuthGrant, OAuthSignIn, Tool
from connections.oauth import mcp as oauth_mcp
from connections.oauth import tokens
from ops.signals import asker_gone
from ops.visible import refusal

logger = logging.getLogger(__name__)

MAX_NAME_LENGTH = 100
MAX_API_KEY_LENGTH = 4096
MAX_CONNECTIONS = 20  # per person


class ConnectionRefused(Exception):
    """The connection cannot be added or synced; the text says what failed. ``authentication`` when the server
    wants a key or a sign-in; ``oauth`` when it publishes how to sign in with OAuth (the console then starts one)."""

    def __init__(self, message: str, *, authentication: bool = False, oauth: bool = False) -> None:
        super().__init__(message)
        self.authentication = authentication or oauth
        self.oauth = oauth


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
    hidden = refusal('"name"', name)
    if hidden:
        raise ConnectionRefused(hidden)
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


def _read_server(owner_id: int, url: str, api_key: str, *, signed_in: bool = False) -> client.ServerInfo:
    """initialize + tools/list while the person waits: in one of the bounded check slots (connections/checks.py,
    ChecksBusy when none is free) and within MCP_CHECK_TIMEOUT_SECONDS. A server that refuses us without a key and
    publishes OAuth metadata is refused with ``oauth`` set."""
    try:
        with check_slot(owner_id):
            info = client.list_tools(url, api_key, timeout=settings.MCP_CHECK_TIMEOUT_SECONDS)
            return info
    except client.ScopeRequired as more:
        raise ConnectionRefused(str(more)) from None  # no new token of this sign-in would allow more
    except client.AuthenticationRequired as refused:
        if not api_key and not signed_in and oauth_mcp.offers_oauth(url):
            raise ConnectionRefused(
                "This MCP server signs in with OAuth: connect it from the web console (Connections), where you "
                "sign in at the server.",
                oauth=True,
            ) from None
        raise ConnectionRefused(str(refused), authentication=True) from None
    except client.McpError as failed:
        raise ConnectionRefused(str(failed)) from None


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

    def read(credential: str) -> client.ServerInfo:
        return _read_server(connection.owner_id, connection.server_url, credential, signed_in=signed_in)

    signed_in = connection.oauth_grant_id is not None
    try:
        info = using_credential(connection, read)
    except (crypto.UnreadableSecret, tokens.SignInAgain, tokens.TokenUnavailable) as unusable:
        Connection.objects.filter(pk=connection.pk).update(last_error=str(unusable))
        raise ConnectionRefused(str(unusable), authentication=isinstance(unusable, tokens.SignInAgain)) from None
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
    """Remove the connection; its OAuth tokens are revoked first where the server offers revocation (RFC 7009)."""
    grant = connection.oauth_grant
    if grant is not None:
        tokens.revoke(grant)
    with transaction.atomic():
        # Before the delete, which unlinks its calls: the requests it led to die with it
        # (assistant/approval/requests.py).
        asker_gone.send(Connection, connection=connection, why=f"the connection “{connection.name}” was removed")
        connection.delete()
        if grant is not None:
            grant.delete()
        summary = f"MCP server “{connection.name}” at {connection.server_url}"
        audit.record(connection.owner_id, AuditKind.CONNECTION_REMOVED, summary, by=by)
    logger.info("mcp connection %s removed", connection.public_id)


def set_trusted(connection: Connection, trusted: bool, *, by: str = audit.COMMAND) -> None:
    """The person's word on the server: trusted, its tools' read-only claims hold for automations' messages too
    (assistant/approval/rule.py); untrusted (the default), a tool that says it only reads waits for approval there."""
    with transaction.atomic():
        if Connection.objects.filter(pk=connection.pk).exclude(trusted=trusted).update(trusted=trusted):
            said = "trusted: its tools' read-only claims are believed" if trusted else "no longer trusted"
            summary = f"MCP server “{connection.name}” {said}"
            audit.record(connection.owner_id, AuditKind.CONNECTION_TRUST_CHANGED, summary, by=by)
    connection.trusted = trusted


def mark_acting(connection: Connection, tool: str, acting: bool, *, by: str = audit.COMMAND) -> bool:
    """The person marks one of the server's tools as acting (treated as changing something whatever the server
    says), or takes the mark back. By name, so that a sync keeps it. False for a tool the server does not list."""
    with transaction.atomic():
        locked = Connection.objects.select_for_update().get(pk=connection.pk)
        before = {name for name in locked.acting_tools or [] if isinstance(name, str)}
        if acting and not locked.tools.filter(name=tool).exists():
            return False
        marked = before | {tool} if acting else before - {tool}
        if marked != before:
            locked.acting_tools = sorted(marked)
            locked.save(update_fields=["acting_tools"])
            said = "treated as acting, whatever the server says" if acting else "as the server describes it again"
            summary = f"MCP server “{locked.name}”: {tool[:100]} {said}"
            audit.record(locked.owner_id, AuditKind.CONNECTION_TRUST_CHANGED, summary, by=by)
    connection.acting_tools = locked.acting_tools
    return True


def want_more_scope(connection: Connection, challenged: client.ScopeRequired) -> str:
    """A server's scope challenge during a call: the scopes it asked for that the sign-in lacks are kept on the
    grant for the next sign-in to ask for, and the connection's page says why. Returns them ("" when the server
    named none: the next sign-in asks for what the server publishes)."""
    grant = connection.oauth_grant
    if grant is None:
        return ""
    have = set(grant.scope.split())
    wanted = oauth_mcp.joined_scopes(grant.scope_wanted, " ".join(s for s in challenged.scope.split() if s not in have))
    OAuthGrant.objects.filter(pk=grant.pk).update(scope_wanted=wanted[:2000])
    Connection.objects.filter(pk=connection.pk).update(last_error=f"Sign in again to allow more: {challenged}"[:1000])
    return wanted


def api_key_of(connection: Connection) -> str:
    return crypto.decrypt(connection.api_key_encrypted)


def credential_of(connection: Connection) -> str:
    """What the server takes as its Bearer token: a fresh OAuth access token (refreshed when it expires soon;
    SignInAgain or TokenUnavailable when there is none), or the stored API key (empty when there is none)."""
    if connection.oauth_grant_id is not None:
        return tokens.access_token(connection.oauth_grant_id)
    return api_key_of(connection)


def using_credential[T](connection: Connection, work: Callable[[str], T]) -> T:
    """``work(credential)``; when the server refuses an OAuth access token (401), once more with a refreshed one.
    A scope challenge (client.ScopeRequired) is the caller's: a refreshed token allows no more."""
    credential = credential_of(connection)
    try:
        return work(credential)
    except (client.AuthenticationRequired, ConnectionRefused) as refused:
        if isinstance(refused, client.ScopeRequired):
            raise
        if connection.oauth_grant_id is None or not getattr(refused, "authentication", True):
            raise
    return work(tokens.access_token(connection.oauth_grant_id, rejected=credential))


# --- OAuth sign-ins ------------------------------------------------------------------------------------------------


def start_sign_in(
    owner: User,
    name: object,
    server_url: object,
    redirect_uri: str,
    client_id: str = "",
    client_secret: str = "",
    client_metadata_url: str = "",
) -> oauth_mcp.Started:
    """Begin the OAuth sign-in for a new connection (connections/oauth/mcp.py); ConnectionRefused when it cannot."""
    check_room(owner)
    new = validate(name, server_url, None)
    try:
        with check_slot(owner.pk):
            return oauth_mcp.begin(
                owner.pk,
                redirect_uri=redirect_uri,
                server_url=new.server_url,
                name=new.name,
                client_id=client_id,
                client_secret=client_secret,
                client_metadata_url=client_metadata_url,
            )
    except oauth_mcp.ClientCredentialsNeeded as needed:
        raise ClientCredentialsNeeded(str(needed)) from None
    except oauth_mcp.SignInRefused as refused:
        raise ConnectionRefused(str(refused)) from None


class ClientCredentialsNeeded(ConnectionRefused):
    """The server offers no client registration: the person must paste a client id and secret."""


def start_sign_in_again(connection: Connection, redirect_uri: str) -> oauth_mcp.Started:
    """A new sign-in for an existing OAuth connection, with the client it was registered with, asking for what the
    last sign-in had and what the server asked for since (its scope challenges)."""
    grant = connection.oauth_grant
    if grant is None:
        raise ConnectionRefused("This connection does not sign in with OAuth.")
    try:
        with check_slot(connection.owner_id):
            return oauth_mcp.begin(
                connection.owner_id,
                redirect_uri=redirect_uri,
                server_url=connection.server_url,
                connection=connection,
                client=tokens.client_of(grant),
                more_scope=f"{grant.scope} {grant.scope_wanted}",
            )
    except (oauth_mcp.SignInRefused, crypto.UnreadableSecret) as refused:
        raise ConnectionRefused(str(refused)) from None


def finish_sign_in(
    owner: User, state: object, params: dict[str, str], session_digests: list[str], *, by: str
) -> Connection:
    """The end of a sign-in: take it once, exchange the code, read the server's tools with the new token, then
    store the connection (or the new tokens of one signing in again). Nothing is stored when any step fails, and
    tokens obtained before a later step failed are revoked."""
    try:
        sign_in = oauth_mcp.take(owner.pk, state, session_digests)
        issued = oauth_mcp.finish(sign_in, params)
    except (oauth_mcp.SignInRefused, crypto.UnreadableSecret) as refused:
        raise ConnectionRefused(str(refused)) from None
    try:
        info = _read_server(owner.pk, sign_in.server_url, issued.access_token, signed_in=True)
        return _store_signed_in(owner, sign_in, issued, info, by=by)
    except BaseException:
        _revoke_unstored(sign_in, issued)
        raise


def _revoke_unstored(sign_in: OAuthSignIn, issued: tokens.Tokens) -> None:
    tokens.revoke_unstored(
        issued,
        revocation_endpoint=sign_in.revocation_endpoint,
        client_id=sign_in.client_id,
        client_secret_encrypted=sign_in.client_secret_encrypted,
        token_auth_method=sign_in.token_auth_method,
    )


def _store_signed_in(
    owner: User, sign_in: OAuthSignIn, issued: tokens.Tokens, info: client.ServerInfo, *, by: str
) -> Connection:
    with transaction.atomic():
        lock_account(owner)
        existing = sign_in.connection
        if existing is not None:
            existing = Connection.objects.select_related("oauth_grant").get(pk=existing.pk)
            if existing.oauth_grant is not None:
                tokens.replace_tokens(existing.oauth_grant, issued, asked=sign_in.scope)
            else:
                existing.oauth_grant = _new_grant(owner, sign_in, issued)
            existing.last_error = ""
            existing.last_synced_at = timezone.now()
            existing.save(update_fields=["oauth_grant", "last_error", "last_synced_at"])
            existing.tools.all().delete()
            _store_tools(existing, info.tools)
            audit.record(owner, AuditKind.CONNECTION_ADDED, f"Signed in again to MCP server “{existing.name}”", by=by)
            return existing
        check_room(owner)
        connection = Connection.objects.create(
            owner=owner,
            name=sign_in.name,
            server_url=sign_in.server_url,
            oauth_grant=_new_grant(owner, sign_in, issued),
            server_name=_storable(info.name)[:200],
            server_version=_storable(info.version)[:100],
            last_synced_at=timezone.now(),
        )
        _store_tools(connection, info.tools)
        summary = (
            f"MCP server “{connection.name}” at {connection.server_url}, signed in with OAuth ({len(info.tools)} tools)"
        )
        audit.record(owner, AuditKind.CONNECTION_ADDED, summary, by=by)
    logger.info("mcp connection %s added with oauth for user %s", connection.public_id, owner.pk)
    return connection


def _new_grant(owner: User, sign_in: OAuthSignIn, issued: tokens.Tokens) -> OAuthGrant:
    return tokens.store_grant(
        owner.pk,
        GrantKind.MCP,
        client=tokens.Client(
            sign_in.client_id, crypto.decrypt(sign_in.client_secret_encrypted), sign_in.token_auth_method
        ),
        token_endpoint=sign_in.token_endpoint,
        tokens=issued,
        issuer=sign_in.issuer,
        revocation_endpoint=sign_in.revocation_endpoint,
        resource=sign_in.resource,
        scope=sign_in.scope,
    )
