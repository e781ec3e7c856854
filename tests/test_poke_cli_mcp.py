"""The unmodified npm CLI's `poke mcp add` (and `poke tunnel`) against the live server and a real FastMCP server."""

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from connections.models import Connection
from keys.scopes import CLI, CONSOLE_DEFAULT
from tests.factories import make_key
from tests.mcp_server import SERVER_KEY, running_mcp_server
from tests.oauth_mcp_server import running_oauth_mcp_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def logged_in(poke_home):
    key, plaintext = make_key(scopes=CLI)  # what `poke login` grants
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": plaintext}))
    return key


def test_mcp_add_with_a_key_that_may_not_prints_the_missing_scope(poke_cli, poke_home):
    _, plaintext = make_key(scopes=CONSOLE_DEFAULT)
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": plaintext}))
    with running_mcp_server() as server:
        done = poke_cli.run("mcp", "add", server.url, "--name", "Tracker")

    assert done.returncode != 0
    assert "it lacks the scope connections:manage" in done.output
    assert not Connection.objects.exists()


def test_mcp_add_connects_to_a_fastmcp_server_and_reports_its_tools(poke_cli, logged_in):
    with running_mcp_server(require_key=True) as server:
        done = poke_cli.run("mcp", "add", server.url, "--name", "Tracker", "--api-key", SERVER_KEY)

    assert done.returncode == 0, done.output
    assert "MCP connection added successfully!" in done.stdout
    assert "Name:       Tracker" in done.stdout
    assert f"Server URL: {server.url}" in done.stdout
    assert "Tools:      5" in done.stdout
    stored = Connection.objects.get()
    assert stored.owner == logged_in.owner
    assert SERVER_KEY not in stored.api_key_encrypted


def test_mcp_add_of_a_server_behind_oauth_prints_the_web_app_message(poke_cli, logged_in):
    with running_oauth_mcp_server() as server:
        done = poke_cli.run("mcp", "add", server.url, "--name", "Notes")

    assert done.returncode == 1
    assert "This MCP server requires OAuth authentication." in done.stderr
    assert "Add it from the web app instead." in done.stderr
    assert not Connection.objects.exists()


def test_mcp_add_without_the_servers_key_prints_what_to_do(poke_cli, logged_in):
    with running_mcp_server(require_key=True) as server:
        done = poke_cli.run("mcp", "add", server.url, "--name", "Tracker")

    assert done.returncode == 1
    assert "Failed to add MCP connection: The MCP server answered HTTP 401: it needs an API key" in done.stderr
    assert "--api-key" in done.stderr
    assert not Connection.objects.exists()


@pytest.mark.parametrize("path", ["/", "/keys/", "/login/"])
def test_mcp_add_of_a_server_that_is_not_an_mcp_server_says_so(poke_cli, logged_in, live_server, path):
    # This server's own pages answer the CLI's POST with a web page (Django's CSRF 403): not an MCP server asking for
    # a key, which is what the person was told before.
    if connection.vendor == "sqlite":
        pytest.skip(
            "on in-memory SQLite the live server answers one request at a time (tests/conftest.py), so it "
            "cannot check itself while it serves the CLI; PostgreSQL runs this, and the next test any DB"
        )
    done = poke_cli.run("mcp", "add", f"{live_server.url}{path}", "--name", "Not MCP", "--api-key", "anything")
    _assert_told_not_an_mcp_server(done)


@pytest.mark.parametrize("status", [200, 403])
def test_mcp_add_of_a_web_site_says_it_is_not_an_mcp_server(poke_cli, logged_in, status):
    # Another web site on 127.0.0.1 that answers every request with an HTML page, as a site's CSRF 403 or its home
    # page would.
    with _web_site(status) as url:
        done = poke_cli.run("mcp", "add", url, "--name", "Not MCP", "--api-key", "anything")
    _assert_told_not_an_mcp_server(done)


@contextmanager
def _web_site(status: int) -> Iterator[str]:
    class Page(BaseHTTPRequestHandler):
        def _page(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            body = b"<!doctype html><html><body><h1>Forbidden (403)</h1><p>CSRF verification failed.</p></body></html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _page

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def _assert_told_not_an_mcp_server(done) -> None:
    assert done.returncode == 1
    assert re.search(r"not (as )?an MCP server", done.stderr), done.stderr
    assert "needs an API key" not in done.stderr
    assert "OAuth" not in done.stderr
    assert not Connection.objects.exists()


def test_mcp_add_of_a_url_that_is_not_http_prints_the_reason(poke_cli, logged_in):
    done = poke_cli.run("mcp", "add", "ftp://example.com/mcp", "--name", "Tracker")

    assert done.returncode == 1
    assert "Failed to add MCP connection: serverUrl must be an http:// or https:// URL" in done.stderr


def test_mcp_add_of_an_unreachable_server_prints_what_failed(poke_cli, logged_in):
    with running_mcp_server() as server:
        url = server.url
    done = poke_cli.run("mcp", "add", url, "--name", "Gone")

    assert done.returncode == 1
    assert "Failed to add MCP connection: Could not add the MCP server: Could not connect" in done.stderr


def test_tunnel_is_refused_before_anything_is_downloaded(poke_cli, logged_in, poke_home):
    done = poke_cli.run("tunnel", "http://localhost:3000/mcp", "--name", "Local")

    assert done.returncode == 1
    assert "Failed to create tunnel: Tunnels are not available on this server" in done.stderr
    assert "Downloading tunnel agent" not in done.stdout
    assert not any((poke_home.root / "cache").rglob("piko-*"))
