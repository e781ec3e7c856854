"""Talking to an MCP server over Streamable HTTP with the official `mcp` SDK: list its tools, call one.

Each call is one short session (initialize, then the request) run to completion inside ``MCP_TIMEOUT_SECONDS``
(or the caller's timeout), from synchronous code: the request that adds a connection, or the delivery worker's
tool-calling loop. Errors come back as ``McpError`` with a sentence fit to show the person; the server's API key
never appears in one.
"""

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from django.conf import settings
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as ProtocolError
from mcp.types import PaginatedRequestParams

from connections import transport_internals
from connections.addresses import GuardedBackend
from connections.network import one_line
from connections.threads import in_own_thread
from ops.bounded import Bound, TooLarge, TooSlow

MAX_RESULT_CHARACTERS = 20_000
MAX_PAGES = 50  # of tools/list: a server that pages forever is cut off there
MAX_TOOLS = 200  # per server: tools/list stops at the first page that goes past it


class McpError(Exception):
    """The server could not be used; the text says what failed, in one sentence."""


class AuthenticationRequired(McpError):
    """The server answered 401: it needs an API key (or OAuth, which we do not do)."""


class ScopeRequired(AuthenticationRequired):
    """The server answered 403 ``insufficient_scope``: the token is good but allows too little (the MCP
    authorization specification's scope challenge). ``scope``: what the server asked for, space-separated, or empty
    when it did not say. A refreshed token would allow no more: only a new sign-in that asks for it can."""

    def __init__(self, message: str, scope: str) -> None:
        super().__init__(message)
        self.scope = scope


# RFC 6750 section 3: the challenge's error and scope parameters. A scope token is RFC 6749's printable ASCII
# without space, '"' or '\'; a server that sends anything else, or more than a few hundred characters of it, is
# not asking for a scope we could pass on.
_CHALLENGE_ERROR = re.compile(r'(?:^|[\s,])error="([^"]*)"')
_CHALLENGE_SCOPE = re.compile(r'(?:^|[\s,])scope="([\x21\x23-\x5b\x5d-\x7e ]{1,500})"')


def scope_challenged(challenge: str) -> str | None:
    """The scope a ``WWW-Authenticate: Bearer error="insufficient_scope"`` challenge asks for ("" when it names
    none); None when the challenge is not a scope challenge."""
    error = _CHALLENGE_ERROR.search(challenge)
    if error is None or error.group(1) != "insufficient_scope":
        return None
    scope = _CHALLENGE_SCOPE.search(challenge)
    return " ".join(scope.group(1).split()) if scope else ""


class _AnswerTooLarge(httpx2.StreamError):
    """Raised inside the SDK's reading of a body; the session's Bound remembers why, to explain the failure."""


class _CappedStream(httpx2.AsyncByteStream):
    """A body read through the session's bound: MCP_MAX_ANSWER_BYTES for all the session's answers together,
    counted as they arrive, so an answer of 100 MB is cut off at the limit instead of being read into memory."""

    def __init__(self, inner: httpx2.AsyncByteStream, bound: Bound) -> None:
        self._inner, self._bound = inner, bound

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            try:
                self._bound.spend(len(chunk))
            except TooLarge as error:
                raise _AnswerTooLarge(str(error)) from None
            except TooSlow:
                raise TimeoutError from None
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport, every response body read through the session's bound."""

    def __init__(self, bound: Bound) -> None:
        super().__init__(trust_env=False)
        self._bound = bound
        # The same pool httpx2 builds, with our network backend: every TCP connection goes to a checked address.
        transport_internals.use_network_backend(self, GuardedBackend())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._bound),
            extensions=response.extensions,
        )


@dataclass(frozen=True, slots=True)
class ToolInfo:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    # The server's annotation readOnlyHint (MCP 2025-03-26): true when the tool changes nothing. A hint, and absent
    # means "not read-only": such a tool needs approval where approval applies (assistant/tools/__init__.py).
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class ServerInfo:
    name: str
    version: str
    tools: list[ToolInfo]


@dataclass(frozen=True, slots=True)
class ToolResult:
    text: str
    is_error: bool


class _Statuses:
    """The HTTP statuses the server answered with: the SDK turns a 401 or a 404 into a generic protocol error,
    and the person needs to know which it was."""

    def __init__(self) -> None:
        self.refusals: list[int] = []
        self.challenges: list[str] = []  # the WWW-Authenticate of each refusal ("" when it sent none)
        self.content_types: list[str] = []
        self.refused_with_a_web_page = False

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 405:
            return  # a server without a stream of its own messages (the spec allows it): not a refusal
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.status_code >= 400:
            self.refusals.append(response.status_code)
            self.challenges.append(response.headers.get("www-authenticate", "")[:2000])
            # An MCP server refuses in JSON-RPC, OAuth's JSON or plain text; an HTML page is a web site's (a
            # framework's CSRF 403, say), whatever its status.
            self.refused_with_a_web_page = self.refused_with_a_web_page or content_type in _WEB_PAGES
        elif response.request.method == "POST":
            self.content_types.append(content_type)


_WEB_PAGES = ("text/html", "application/xhtml+xml")


def bounded_http_client(timeout: float, limit: int, what: str = "The server") -> tuple[httpx2.AsyncClient, Bound]:
    """An httpx2 client for other exchanges with a person's servers (OAuth discovery and tokens,
    connections/oauth/): every TCP connection to a checked address, no redirects followed, every answer read through
    a bound of ``limit`` bytes (ops/bounded.py; ``bound.exceeded`` says when that cut an answer off). The deadline is
    the caller's (anyio.fail_after): the bound's own is a second later."""
    bound = Bound(what, max_bytes=limit, seconds=timeout + 1)
    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout), transport=_CappedTransport(bound), trust_env=False, follow_redirects=False
    )
    return http, bound


def _run[T](
    url: str,
    api_key: str,
    work: Callable[[ClientSession], Awaitable[T]],
    timeout: float,
    extra_headers: dict[str, str] | None = None,
) -> T:
    statuses = _Statuses()
    # The deadline is anyio's (it cancels the reads); the bound counts the bytes.
    bound = Bound("The MCP server", max_bytes=settings.MCP_MAX_ANSWER_BYTES, seconds=timeout + 1)
    headers = {**(extra_headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}

    async def session() -> T:
        with anyio.fail_after(timeout):
            async with (
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=timeout,
                    transport=_CappedTransport(bound),
                    trust_env=False,
                    event_hooks={"response": [statuses]},
                ) as http,
                streamable_http_client(url, http_client=http, max_sse_event_size=bound.max_bytes) as (read, write),
                ClientSession(read, write, read_timeout_seconds=timeout) as mcp,
            ):
                await mcp.initialize()
                return await work(mcp)

    try:
        # The session's event loop runs in a thread of its own: the caller's thread may already have a loop running
        # (an ASGI server, a test driving a browser), and anyio.run() refuses to start inside one.
        return in_own_thread(lambda: anyio.run(session), name="mcp-session")
    except McpError:
        raise
    except BaseException as error:  # anyio wraps what failed inside the session in exception groups
        if isinstance(bound.exceeded, TooLarge):
            raise McpError(str(bound.exceeded)) from None
        raise _explained(error, statuses) from None
    finally:
        bound.release()  # its bytes back to the process's budget (ops/bounded.py)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _explained(error: BaseException, statuses: _Statuses) -> McpError:
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        raise error
    if statuses.refusals and statuses.refused_with_a_web_page:
        return McpError(
            f"The server answered HTTP {statuses.refusals[0]} with a web page: this URL is not an MCP server "
            "(check the URL: Streamable HTTP servers usually serve it at /mcp)."
        )
    if statuses.refusals:
        return _refusal(statuses.refusals[0], statuses.challenges[0])
    if any(kind not in ("application/json", "text/event-stream") for kind in statuses.content_types):
        return McpError(
            "The server answered, but not as an MCP server: it sent neither JSON nor an event stream "
            "(check the URL: Streamable HTTP servers usually serve it at /mcp)."
        )
    leaves = _leaves(error)
    for leaf in leaves:
        if isinstance(leaf, McpError):
            return leaf
        if isinstance(leaf, TimeoutError):
            return McpError("The MCP server did not answer in time.")
        if isinstance(leaf, httpx2.HTTPStatusError):
            return _refusal(leaf.response.status_code, leaf.response.headers.get("www-authenticate", ""))
        if isinstance(leaf, httpx2.ConnectError):
            return McpError("Could not connect to the MCP server (refused, unreachable or not a public address).")
        if isinstance(leaf, httpx2.TransportError):
            return McpError(f"The connection to the MCP server failed ({type(leaf).__name__}).")
        if isinstance(leaf, ProtocolError):
            return McpError(f"The MCP server refused the request: {one_line(str(leaf), 300)}")
    return McpError(
        f"The server did not speak MCP over Streamable HTTP ({type(leaves[0]).__name__ if leaves else 'no answer'})."
    )


def _refusal(status: int, challenge: str = "") -> McpError:
    wanted = scope_challenged(challenge) if status == 403 else None
    if wanted is not None:
        asked = f" (it asks for: {wanted})" if wanted else ""
        return ScopeRequired(f"The MCP server needs more access than this sign-in allows{asked}.", wanted)
    if status in (401, 403):
        return AuthenticationRequired(
            f"The MCP server answered HTTP {status}: it needs an API key, or a different one."
        )
    if status in (404, 405):
        return McpError(
            f"The server answered HTTP {status}: there is no MCP endpoint at this URL "
            "(Streamable HTTP servers usually serve it at /mcp)."
        )
    return McpError(f"The MCP server answered HTTP {status}.")


def list_tools(url: str, api_key: str = "", timeout: float | None = None) -> ServerInfo:
    """initialize + tools/list (every page)."""

    async def work(mcp: ClientSession) -> ServerInfo:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _page in range(MAX_PAGES):
            page = await mcp.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            if len(tools) + len(page.tools) > MAX_TOOLS:
                raise McpError(f"The MCP server offers more than {MAX_TOOLS} tools, the most supported.")
            tools.extend(
                ToolInfo(
                    name=tool.name,
                    title=tool.title or "",
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema or {"type": "object"}),
                    read_only=bool(tool.annotations is not None and tool.annotations.read_only_hint is True),
                )
                for tool in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        info = mcp.server_info
        return ServerInfo(
            name=str(getattr(info, "name", "") or ""), version=str(getattr(info, "version", "") or ""), tools=tools
        )

    return _run(url, api_key, work, timeout or settings.MCP_TIMEOUT_SECONDS)


def call_tool(
    url: str,
    api_key: str,
    name: str,
    arguments: dict[str, Any],
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> ToolResult:
    """tools/call; the result's text content (other content described), and whether the tool reported an error."""

    async def work(mcp: ClientSession) -> ToolResult:
        result = await mcp.call_tool(name, arguments)
        return ToolResult(text=_result_text(result), is_error=bool(getattr(result, "is_error", False)))

    return _run(url, api_key, work, timeout or settings.MCP_TIMEOUT_SECONDS, headers)


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts) or "(the tool returned no content)"
    return text if len(text) <= MAX_RESULT_CHARACTERS else text[:MAX_RESULT_CHARACTERS] + "… (cut)"
