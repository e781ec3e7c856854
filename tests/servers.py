"""A real HTTP server on 127.0.0.1 that plays the remote assistant (a runtime or a chat-completions API): it
answers from a script and records every request, so tests see exactly what went over the wire."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (to provoke a client timeout)
    hold: threading.Event | None = None  # answer only once this is set (or after 10 s), whatever the delay


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[Answer] = []
        self.received: list[Received] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(
        self,
        status: int = 200,
        body: Any = b"",
        *,
        delay: float = 0.0,
        hold: threading.Event | None = None,
        **headers: str,
    ) -> None:
        """Queue the next answer; a dict or list body is sent as JSON. With `hold`, the answer waits until the test
        sets it: a client that returns before then gave up waiting (no clock needed to tell)."""
        raw = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        if isinstance(body, (dict, list)):
            headers.setdefault("Content-Type", "application/json")
        self.script.append(Answer(status, raw, {k.replace("_", "-"): v for k, v in headers.items()}, delay, hold))

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is expected here, not an error


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer
    disable_nagle_algorithm = True  # headers and body are two writes: see send_json

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.received.append(Received(self.path, headers, body))
        answer = self.server.script.pop(0) if self.server.script else Answer(500, b"no answer scripted")
        time.sleep(answer.delay)
        if answer.hold is not None:
            answer.hold.wait(timeout=10)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving[Server: ThreadingHTTPServer](server: Server) -> Iterator[Server]:
    """``server`` answering on a thread of its own until the block ends."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    """Answer the handler's request with ``body``, JSON: how the fake servers of the tests answer.

    Nagle's algorithm is turned off first: the headers and the body go out as two writes, and with it on the body
    waited for the client's delayed ACK of the headers, about 40 ms an answer on a keep-alive connection (the
    delivery stack's runtime answered in 44 ms at the median when told to answer at once; 0.3 ms without it)."""
    handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
