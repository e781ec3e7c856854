"""A real MCP server behind a real OAuth 2.1 authorization server, on 127.0.0.1: FastMCP with its in-memory OAuth
provider (RFC 9728 protected-resource metadata, RFC 8414 metadata, RFC 7591 dynamic registration, authorization
code with PKCE S256, rotating refresh tokens, RFC 7009 revocation), served by uvicorn in a thread.

The provider signs the person in at once (its /authorize redirects straight back with a code): the browser still
goes there and back, which is what our side of the flow is about. With ``registration=False`` it offers no
registration and knows one confidential client (``CLIENT_ID``/``CLIENT_SECRET``), as servers whose clients are
made in a developer console do.
"""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from fastmcp import FastMCP
from fastmcp.server.auth.providers.in_memory import InMemoryOAuthProvider
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull

CLIENT_ID = "pasted-client-0123"
CLIENT_SECRET = "pasted-secret-0123456789abcdef"


@dataclass
class OAuthMcpServer:
    base: str  # the authorization server's issuer, and the MCP server's origin
    url: str  # the MCP endpoint
    provider: InMemoryOAuthProvider
    requests: list[dict[str, Any]] = field(default_factory=list)  # method, path, headers, form of every request
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # The scope the ``private_notes`` tool needs beyond the sign-in's (None: no such tool). A call without it is
    # answered as the MCP authorization specification's scope challenge: 403 insufficient_scope, naming the scopes.
    private_scope: str | None = None

    def scopes_of(self, authorization: str) -> list[str]:
        token = self.provider.access_tokens.get(authorization.removeprefix("Bearer "))
        return list(token.scopes) if token is not None else []

    def posted(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST" and r["path"] == path]

    def revoke_all_refresh_tokens(self) -> None:
        for token in list(self.provider.refresh_tokens):
            self.provider._revoke_internal(refresh_token_str=token)

    def forget_access_tokens(self) -> None:
        """The server no longer takes the access tokens it issued (as when they expire on its side)."""
        for token in list(self.provider.access_tokens):
            del self.provider.access_tokens[token]


class _Record:
    def __init__(self, app: Any, server: OAuthMcpServer) -> None:
        self.app, self.server = app, server

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        entry: dict[str, Any] = {"method": scope["method"], "path": scope["path"], "headers": headers, "form": {}}
        entry["query"] = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        self.server.requests.append(entry)
        form = headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        rpc = scope["method"] == "POST" and scope["path"] == "/mcp" and self.server.private_scope is not None
        if form or rpc:
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            body = b"".join(chunks)
            if form:
                entry["form"] = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            elif self._lacks_the_private_scope(body, headers):
                await self._challenge(send, headers)
                return
            sent = False

            async def replay() -> dict[str, Any]:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

    def _lacks_the_private_scope(self, body: bytes, headers: dict[str, str]) -> bool:
        call = json.loads(body or b"{}")
        wanted = isinstance(call, dict) and call.get("method") == "tools/call"
        wanted = wanted and call.get("params", {}).get("name") == "private_notes"
        return wanted and self.server.private_scope not in self.server.scopes_of(headers.get("authorization", ""))

    async def _challenge(self, send: Any, headers: dict[str, str]) -> None:
        assert self.server.private_scope is not None
        scopes = [*self.server.scopes_of(headers.get("authorization", "")), self.server.private_scope]
        challenge = (
            f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}", '
            f'resource_metadata="{self.server.base}/.well-known/oauth-protected-resource/mcp", '
            'error_description="This tool needs more access"'
        )
        body = b'{"error": "insufficient_scope"}'
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", challenge.encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


@contextmanager
def running_oauth_mcp_server(
    *,
    registration: bool = True,
    scopes: list[str] | None = None,
    redirect_uri: str | None = None,
    private_scope: str | None = None,
) -> Iterator[OAuthMcpServer]:
    """``redirect_uri``: the one the pre-registered client (``registration=False``) was made with, which may ask
    for ``scopes`` and ``private_scope``; a sign-in is required to have ``scopes``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = InMemoryOAuthProvider(
        base_url=base,
        client_registration_options=ClientRegistrationOptions(enabled=registration, valid_scopes=scopes),
        revocation_options=RevocationOptions(enabled=True),
        required_scopes=scopes,
    )
    if not registration:
        allowed = [*(scopes or []), *([private_scope] if private_scope else [])]
        provider.clients[CLIENT_ID] = OAuthClientInformationFull(
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            token_endpoint_auth_method="client_secret_post",
            redirect_uris=[redirect_uri] if redirect_uri else None,
            grant_types=["authorization_code", "refresh_token"],
            scope=" ".join(allowed) if allowed else None,
        )
    server = OAuthMcpServer(base=base, url=f"{base}/mcp", provider=provider, private_scope=private_scope)
    mcp = FastMCP("OAuth tools", version="2.0.0", auth=provider)

    @mcp.tool(annotations={"readOnlyHint": True})
    def whoami() -> str:
        """Say which client called."""
        server.calls.append(("whoami", {}))
        return "signed in"

    @mcp.tool()
    def create_note(text: str) -> str:
        """Save a note."""
        server.calls.append(("create_note", {"text": text}))
        return f"Saved: {text}"

    if private_scope is not None:

        @mcp.tool(annotations={"readOnlyHint": True})
        def private_notes() -> str:
            """Read the private notes (needs more access than the sign-in gives)."""
            server.calls.append(("private_notes", {}))
            return "the private notes"

    uv = uvicorn.Server(uvicorn.Config(_Record(mcp.http_app(), server), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield server
    finally:
        uv.should_exit = True
        thread.join(5)
        sock.close()
