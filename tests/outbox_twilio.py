"""A Twilio Messages API on 127.0.0.1 for the outbox's tests: the official ``twilio`` library, pointed at it through
TWILIO_API_BASE_URL, creates messages here. It answers like Twilio (201 and the message resource, its sid ``SM…``),
records every create, and can be told to be slow, to fail the next N requests with 503, or to be down."""

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "test-auth-token-0123456789abcdef"


@dataclass
class Created:
    sid: str
    to: str
    body: str
    form: dict[str, str]
    at: float


@dataclass
class FakeTwilio:
    url: str = ""
    created: list[Created] = field(default_factory=list)
    delay: float = 0.0  # seconds before each answer
    fail_next: int = 0  # answer 503 to this many requests, then succeed
    refuse: set[str] = field(default_factory=set)  # numbers answered 400, Twilio's 21211 "invalid 'To' number"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies_to(self, number: str) -> list[str]:
        with self._lock:
            return [c.body for c in self.created if c.to.removeprefix("whatsapp:") == number]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Created]:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            with self._lock:
                if len(self.created) >= count:
                    return list(self.created)
            time.sleep(0.02)
        raise AssertionError(f"the provider got {len(self.created)} messages, not {count}")


def _handler(state: FakeTwilio) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state._lock:
                failing = state.fail_next > 0
                state.fail_next -= failing
            if failing:
                return self._answer(503, {"code": 20500, "message": "Service unavailable", "status": 503})
            if not self.path.endswith(f"/Accounts/{ACCOUNT_SID}/Messages.json"):
                return self._answer(404, {"code": 20404, "message": "Not found", "status": 404})
            form = {name: values[-1] for name, values in parse_qs(raw.decode()).items()}
            if form.get("To", "").removeprefix("whatsapp:") in state.refuse:
                return self._answer(400, {"code": 21211, "message": "The 'To' number is not valid.", "status": 400})
            # Created as Twilio creates it, on receipt: a client that gives up waiting for the answer (or dies) has
            # sent it all the same.
            sid = "SM" + secrets.token_hex(16)
            with state._lock:
                state.created.append(Created(sid, form.get("To", ""), form.get("Body", ""), form, time.monotonic()))
            if state.delay:
                time.sleep(state.delay)
            self._answer(201, {"sid": sid, "status": "queued", "to": form.get("To"), "body": form.get("Body")})

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def fake_twilio() -> Iterator[FakeTwilio]:
    state = FakeTwilio()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
