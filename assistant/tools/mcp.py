"""The tools of the person's active MCP connections, called over Streamable HTTP with the connection's key or OAuth
access token (connections/oauth/), and with X-Poke-Callback-Url / X-Poke-Callback-Token so a long-running tool can
post follow-ups (poke.mcp). A call runs
on the attempt's own thread (it waits on the server for up to MCP_TIMEOUT_SECONDS); its database writes go to the
database threads (ops/database_work.py)."""

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from assistant.models import Action, FollowUpToken, ToolKind
from assistant.tools import Call, Tool, ToolError, tool_name
from connections import client, crypto, services
from connections.models import Connection
from connections.oauth.tokens import SignInAgain, TokenUnavailable
from ops import public_url
from ops.database_work import database

CALLBACK_PATH = "/api/v1/mcp/callback"
TOKEN_PREFIX = "pfu_"


def new_token_for(action: Action) -> str:
    """A one-time follow-up token for the action; only its digest is stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    FollowUpToken.objects.create(action=action, digest=digest_of(token))
    return token


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _note_error(connection_id: int, error: str) -> None:
    Connection.objects.filter(pk=connection_id).update(last_error=error)


def _runner(connection: Connection, name: str) -> Any:
    def run(arguments: dict[str, Any], call: Call) -> str:
        seconds = min(settings.MCP_TIMEOUT_SECONDS, call.seconds_left())
        if seconds < 0.5:
            raise ToolError("No time is left for this tool call in this turn.")
        headers = {
            "X-Poke-Callback-Url": public_url.base_url() + CALLBACK_PATH,
            "X-Poke-Callback-Token": database(new_token_for, call.action),
        }

        def call_with(credential: str) -> client.ToolResult:
            return client.call_tool(connection.server_url, credential, name, arguments, headers, seconds)

        try:
            # The server's key, or its OAuth access token: refreshed when it expires soon, and once after a 401.
            result = services.using_credential(connection, call_with)
        except client.ScopeRequired as more:
            wanted = database(services.want_more_scope, connection, more)
            asked = f" (it asks for: {wanted})" if wanted else ""
            raise ToolError(
                f"{connection.name} needs more access than you allowed when you signed in{asked}. Open Connections "
                "in the console and choose “Sign in again” to allow it, then ask again."
            ) from None
        except SignInAgain as expired:
            database(_note_error, connection.pk, f"Sign in again: {expired}"[:1000])
            raise ToolError(
                f"{connection.name} needs you to sign in again: its sign-in expired or was revoked. Open "
                "Connections in the console and choose “Sign in again”, then ask again."
            ) from None
        except (client.McpError, crypto.UnreadableSecret, TokenUnavailable) as failed:
            database(_note_error, connection.pk, f"Calling {name}: {failed}"[:1000])
            raise ToolError(str(failed)) from None
        if result.is_error:
            raise ToolError(result.text)
        return result.text

    return run


def tools_of(user: User) -> list[Tool]:
    found = []
    for connection in Connection.objects.filter(owner=user, active=True).prefetch_related("tools"):
        prefix = tool_name(connection.name)[:20].lower()
        acting = set(connection.acting_tools or [])
        for tool in connection.tools.all():
            # The server's readOnlyHint unless the person marked the tool as acting; believed for an automation's
            # message only when they trust the server (assistant/approval/rule.py, Effect.CLAIMS_TO_READ).
            read_only = tool.read_only and tool.name not in acting
            description = tool.description or tool.title or tool.name
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            if schema.get("type") != "object":  # function parameters must be an object schema
                schema = {"type": "object", "properties": {}}
            found.append(
                Tool(
                    name=f"{prefix}__{tool_name(tool.name)}",
                    description=f"[{connection.name}] {description}"[:1024],
                    parameters=schema,
                    kind=ToolKind.MCP,
                    run=_runner(connection, tool.name),
                    original_name=tool.name,
                    connection=connection,
                    read_only=read_only,
                    claim_only=read_only,
                    uses_database=False,  # it waits on the server; its two writes go through database()
                )
            )
    return found
