"""A bare MCP server on 127.0.0.1 for answers FastMCP would never send: Streamable HTTP in its JSON form
(initialize, notifications, tools/list), written on the wire by hand so a test can make tools/list huge, endless
or slow, and see how much of it the client read before it hung up."""

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The tools/list answer for a cursor (None for the first page): the result object, or raw bytes to send as the body.
ToolsPage = Callable[[str | None], dict[str, Any] | bytes]


@dataclass
class RawMcpServer:
    url: str
    tools_page: ToolsPage
    tools_list_calls: int = 0
    bytes_written: int = 0  # of tools/list bodies, until the client stopped reading
    hold: threading.Event = field(default_factory=threading.Event)  # tools/list waits for it when `hang` is on
    hang: bool = False


def tool(name: str, description: str = "A tool.") -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    state: RawMcpServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer is what some tests provoke


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(405, b"")  # no stream of server-initiated messages

    def do_DELETE(self) -> None:
        self._send(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        method = message.get("method")
        if "id" not in message:
            self._send(202, b"")
            return
        if method == "initialize":
            result: dict[str, Any] | bytes = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "Raw", "version": "0"},
            }
        elif method == "tools/list":
            state = self.server.state
            state.tools_list_calls += 1
            if state.hang:
                state.hold.wait(10)
            result = state.tools_page((message.get("params") or {}).get("cursor"))
        else:
            result = {}
        if isinstance(result, bytes):
            self._send(200, result, counted=True)
        else:
            self._send(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())

    def _send(self, status: int, body: bytes, *, counted: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "raw-session")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for start in range(0, len(body), 65536):
            self.wfile.write(body[start : start + 65536])
            if counted:
                self.server.state.bytes_written += len(body[start : start + 65536])


@contextmanager
def running_raw_mcp_server(tools_page: ToolsPage) -> Iterator[RawMcpServer]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = RawMcpServer(url=f"http://127.0.0.1:{server.server_address[1]}/mcp", tools_page=tools_page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.state
    finally:
        server.state.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
