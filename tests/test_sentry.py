"""Optional error reporting: with SENTRY_DSN set, a crash reaches Sentry without the caller's key or message.

A real HTTP server on 127.0.0.1 plays Sentry's ingestion endpoint, so the SDK sends exactly what it would send."""

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sentry_sdk
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from config import errors
from ops.sentry import init_sentry

KEY = "psk_" + "k" * 38
SECRET_TEXT = "my bank PIN is " + "4" * 4


def crash(request: HttpRequest) -> HttpResponse:
    presented_key = request.headers["Authorization"].removeprefix("Bearer ")  # a local that must not be reported
    raise RuntimeError(f"the assistant backend exploded ({len(presented_key)})")


urlpatterns = [path("api/v1/crash", crash)]
handler500 = errors.server_error


@pytest.fixture
def sentry_inbox() -> Iterator[tuple[str, list[bytes]]]:
    """A DSN pointing at a local server, and the envelopes it received."""
    received: list[bytes] = []

    class Ingest(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ingest)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://publickey@127.0.0.1:{server.server_address[1]}/42", received
    finally:
        sentry_sdk.get_client().close(timeout=2)
        sentry_sdk.get_global_scope().set_client(None)
        server.shutdown()
        thread.join(timeout=5)


@pytest.mark.urls(__name__)
def test_a_crash_is_reported_without_the_key_the_body_or_cookies(sentry_inbox):
    dsn, received = sentry_inbox
    init_sentry(dsn)

    response = Client(raise_request_exception=False).post(
        "/api/v1/crash",
        data={"message": SECRET_TEXT},
        content_type="application/json",
        headers={"Authorization": f"Bearer {KEY}", "Cookie": "sessionid=abc123"},
    )
    sentry_sdk.flush(timeout=5)

    assert response.status_code == 500
    reported = b"\n".join(received).decode()
    assert "the assistant backend exploded" in reported
    assert "RuntimeError" in reported
    assert "/api/v1/crash" in reported
    assert KEY not in reported
    assert SECRET_TEXT not in reported
    assert "abc123" not in reported
