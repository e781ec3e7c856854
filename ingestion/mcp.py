"""The MCP connection endpoints the `poke` CLI calls (docs/explanation/assistant-tools.md#mcp-connections):

    POST   /api/v1/mcp/connections/cli               {name, serverUrl, apiKey?} → connect, store, list the tools
    POST   /api/v1/mcp/connections/{id}/sync-tools   read the tools again
    GET    /api/v1/mcp/connections[/{id}]            what is stored (never the server's key)
    DELETE /api/v1/mcp/connections/{id}              remove it

`poke tunnel` (a tunnel agent downloaded from the internet, relayed by Poke's own tunnel service) is not offered
here: its calls get a 400 that says so, and what to do instead.
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import audit
from connections import services
from connections.checks import ChecksBusy
from connections.models import Connection, is_connection_id
from ingestion import openapi
from ingestion.authentication import ApiKeyAuthentication, key_of
from ingestion.exceptions import (
    ApiError,
    ConnectionChecksBusy,
    ConnectionNotFound,
    InvalidBody,
    McpAuthenticationRequired,
    McpOAuthRequired,
    McpServerUnusable,
    TooManyConnectionChecks,
    TunnelsNotSupported,
)
from ingestion.negotiation import JsonOnly
from keys.models import Generation
from keys.scopes import Scope
from ops.errors import error_body


class McpKeyAuthentication(ApiKeyAuthentication):
    generation = Generation.V2  # the CLI's token from `poke login` is a V2 key too


def _oauth_required() -> Response:
    body = error_body(McpOAuthRequired.default_code, str(McpOAuthRequired.default_detail))
    return Response({**body, "error": "OAUTH_REQUIRED"}, status=McpOAuthRequired.status_code)


def _busy(busy: ChecksBusy) -> ApiError:
    kind = ConnectionChecksBusy if busy.whole_process else TooManyConnectionChecks
    return kind(str(busy), busy.wait)


def connection_json(connection: Connection) -> dict[str, Any]:
    return {
        "id": connection.public_id,
        "name": connection.name,
        "serverUrl": connection.server_url,
        "hasApiKey": connection.has_api_key,
        "active": connection.active,
        "serverName": connection.server_name,
        "lastSyncedAt": connection.last_synced_at,
        "createdAt": connection.created_at,
        "tools": [
            {"name": tool.name, "title": tool.title, "description": tool.description, "inputSchema": tool.input_schema}
            for tool in connection.tools.all()
        ],
    }


def _refused(refused: services.ConnectionRefused, *, checked_form: bool) -> ApiError:
    if not checked_form:
        return InvalidBody(str(refused))
    if refused.authentication:
        return McpAuthenticationRequired(
            f"{refused} Add the connection again with the server's key (`poke mcp add <url> --name <name> "
            "--api-key <key>`)."
        )
    return McpServerUnusable(f"Could not add the MCP server: {refused}")


class _McpView(APIView):
    authentication_classes = [McpKeyAuthentication]
    content_negotiation_class = JsonOnly
    # Tool servers (and the person's calendar and mailbox, ingestion/mailcal.py) the assistant then acts through:
    # listing them too is for a key given connections:manage.
    required_scopes = {method: Scope.CONNECTIONS_MANAGE for method in ("GET", "POST", "DELETE")}

    def owner_id(self, request: Request) -> int:
        key = key_of(request)
        return key.owner_id

    def connection(self, request: Request, connection_id: str) -> Connection:
        if not is_connection_id(connection_id):
            raise ConnectionNotFound()  # checked before the query: a NUL in a query is an error on PostgreSQL
        found = (
            Connection.objects.filter(public_id=connection_id, owner_id=self.owner_id(request))
            .prefetch_related("tools")
            .first()
        )
        if found is None:
            raise ConnectionNotFound()
        return found


class AddConnectionView(_McpView):
    http_method_names = ["post", "options"]

    @openapi.mcp_add_endpoint
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise InvalidBody('Send a JSON object: {"name": "...", "serverUrl": "https://.../mcp", "apiKey": "..."}.')
        if body.get("tunnel"):
            raise TunnelsNotSupported()
        key = key_of(request)
        try:
            services.check_room(key.owner)
            new = services.validate(body.get("name"), body.get("serverUrl"), body.get("apiKey"))
        except services.ConnectionRefused as refused:
            raise _refused(refused, checked_form=False) from None
        try:
            connection = services.add_connection(
                key.owner, new.name, new.server_url, new.api_key or None, by=audit.by_key(key.name, key.hint)
            )
        except services.ConnectionRefused as refused:
            if refused.oauth:
                return _oauth_required()
            raise _refused(refused, checked_form=True) from None
        except ChecksBusy as busy:
            raise _busy(busy) from None
        tools = connection.tools.count()
        return Response(
            {"success": True, "message": f"Connected; the server offers {tools} tools.", **connection_json(connection)},
            status=status.HTTP_201_CREATED,
        )


class ConnectionListView(_McpView):
    http_method_names = ["get", "head", "options"]

    @openapi.mcp_list_endpoint
    def get(self, request: Request) -> Response:
        connections = Connection.objects.filter(owner_id=self.owner_id(request)).prefetch_related("tools")
        return Response({"success": True, "connections": [connection_json(c) for c in connections]})


class ConnectionView(_McpView):
    http_method_names = ["get", "head", "delete", "options"]

    @openapi.mcp_get_endpoint
    def get(self, request: Request, connection_id: str) -> Response:
        return Response({"success": True, **connection_json(self.connection(request, connection_id))})

    @openapi.mcp_remove_endpoint
    def delete(self, request: Request, connection_id: str) -> Response:
        key = key_of(request)
        services.remove_connection(self.connection(request, connection_id), by=audit.by_key(key.name, key.hint))
        return Response({"success": True, "message": "The MCP connection was removed."})


class SyncToolsView(_McpView):
    http_method_names = ["post", "options"]

    @openapi.mcp_sync_endpoint
    def post(self, request: Request, connection_id: str) -> Response:
        connection = self.connection(request, connection_id)
        try:
            services.sync_tools(connection)
        except services.ConnectionRefused as refused:
            if refused.oauth:
                return _oauth_required()
            if refused.authentication:
                raise McpAuthenticationRequired(f"Could not read the tools: {refused}") from None
            raise McpServerUnusable(f"Could not read the tools: {refused}") from None
        except ChecksBusy as busy:
            raise _busy(busy) from None
        connection = self.connection(request, connection_id)
        return Response({"success": True, "message": "Tools synced.", **connection_json(connection)})


@extend_schema(exclude=True)  # not offered: every call is the same 400 (docs/explanation/assistant-tools.md)
class TunnelView(_McpView):
    """activate-tunnel and create-recipe: parts of `poke tunnel`, which this server does not offer."""

    http_method_names = ["post", "options"]

    def post(self, request: Request, connection_id: str) -> Response:
        raise TunnelsNotSupported()
