"""Hostile MCP authorization servers: each gets a clear refusal, nothing is stored, never a 500. A small server on
127.0.0.1 plays an MCP server and its authorization server (RFC 9728 and RFC 8414 metadata, registration, token
endpoint), each part misbehaving as a test asks."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.test import Client

from connections.models import Connection, OAuthGrant, OAuthSignIn
from connections.oauth import mcp as oauth_mcp
from connections.oauth.http import OAuthHttpError, exchange

pytestmark = pytest.mark.django_db


@dataclass
class Behaviour:
    registration: dict = field(
        default_factory=lambda: {"client_id": "hostile-client", "token_endpoint_auth_method": "none"}
    )
    token: str = "ok"  # ok | hang | huge
    metadata: dict = field(default_factory=dict)  # overrides of the authorization server's metadata
    release: threading.Event = field(default_factory=threading.Event)
    huge_bytes_sent: int = 0


class HostileServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.base = f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        base = self.server.base
        if self.path == "/.well-known/oauth-protected-resource/mcp":
            self._json(200, {"resource": f"{base}/mcp", "authorization_servers": [f"{base}/"]})
        elif self.path == "/.well-known/oauth-authorization-server":
            metadata = {
                "issuer": f"{base}/",
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                **self.server.behaviour.metadata,
            }
            self._json(200, metadata)
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        base = self.server.base
        behaviour = self.server.behaviour
        if self.path == "/mcp":
            challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
            self._json(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
        elif self.path == "/register":
            self._json(201, behaviour.registration)
        elif self.path == "/token" and behaviour.token == "hang":
            behaviour.release.wait(30)
        elif self.path == "/token" and behaviour.token == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(100_000_000))
            self.end_headers()
            chunk = b" " * 1_000_000
            try:
                for _ in range(100):  # 100 MB at most, whoever stops reading first
                    self.wfile.write(chunk)
                    behaviour.huge_bytes_sent += len(chunk)
            except OSError:
                pass
        elif self.path == "/token":
            self._json(200, {"access_token": "a" * 30, "token_type": "Bearer", "expires_in": 3600})
        else:
            self._json(404, {"error": "not_found"})


@contextmanager
def hostile(behaviour: Behaviour) -> Iterator[HostileServer]:
    server = HostileServer(behaviour)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        behaviour.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _callback_here(settings):
    settings.PUBLIC_BASE_URL = "http://testserver"


@pytest.fixture
def console(client, user):
    client.force_login(user)
    return client


def add(console, server: HostileServer):
    return console.post("/connections/", {"name": "Hostile", "server_url": f"{server.base}/mcp", "api_key": ""})


def come_back(console, authorization_url: str):
    state = parse_qs(urlsplit(authorization_url).query)["state"][0]
    return console.get("/connections/oauth/callback/", {"code": "some-code", "state": state})


def nothing_stored() -> bool:
    return not Connection.objects.exists() and not OAuthGrant.objects.exists()


def test_a_registration_without_a_client_id_is_refused(console):
    with hostile(Behaviour(registration={"client_name": "no id here"})) as server:
        response = add(console, server)

    assert response.status_code == 400
    assert "registration answer has no client ID" in response.content.decode()
    assert nothing_stored() and not OAuthSignIn.objects.exists()


def test_a_token_endpoint_that_hangs_is_given_up_on_in_time(console, settings):
    settings.OAUTH_TIMEOUT_SECONDS = 2
    with hostile(Behaviour(token="hang")) as server:
        started = add(console, server)
        assert started.status_code == 200
        began = time.monotonic()
        response = come_back(console, started.context["authorization_url"])
        took = time.monotonic() - began

    assert response.status_code == 400
    assert "token endpoint did not answer in time" in response.context["reason"]
    assert took < 10
    assert nothing_stored()


def test_a_token_endpoint_that_answers_100_mb_is_cut_off(console):
    behaviour = Behaviour(token="huge")
    with hostile(behaviour) as server:
        started = add(console, server)
        response = come_back(console, started.context["authorization_url"])

    assert response.status_code == 400
    assert "answered more than 1000 kB" in response.context["reason"]
    assert behaviour.huge_bytes_sent < 20_000_000  # we stopped reading long before the end
    assert nothing_stored()


def test_an_authorization_endpoint_that_is_not_http_is_refused(console):
    with hostile(Behaviour(metadata={"authorization_endpoint": "javascript:alert(1)"})) as server:
        response = add(console, server)

    assert response.status_code == 400
    assert nothing_stored() and not OAuthSignIn.objects.exists()


def test_a_server_without_pkce_s256_is_refused(console):
    with hostile(Behaviour(metadata={"code_challenge_methods_supported": ["plain"]})) as server:
        response = add(console, server)

    assert response.status_code == 400
    assert "does not support PKCE with S256" in response.content.decode()
    assert nothing_stored()


def test_a_well_behaved_peer_of_the_same_kind_connects_far_enough(console):
    """The control for the tests above: the same server, behaving, gets as far as the token (and then is no MCP
    server, which is refused too, with its tokens never stored)."""
    with hostile(Behaviour()) as server:
        started = add(console, server)
        response = come_back(console, started.context["authorization_url"])

    assert started.status_code == 200
    assert response.status_code == 400 and "401" in response.context["reason"]
    assert nothing_stored()


# --- addresses inside our network (MCP_ALLOW_PRIVATE_ADDRESSES off, as in production) ------------------------------


def test_metadata_pointing_inside_our_network_is_never_fetched(settings):
    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False
    challenge = httpx2.Response(
        401, headers={"WWW-Authenticate": 'Bearer resource_metadata="http://169.254.169.254/latest/meta-data/"'}
    )

    with pytest.raises(OAuthHttpError, match="private, loopback or link-local"):
        oauth_mcp._resource_metadata("https://mcp.example.com/mcp", challenge)


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.5/token", "http://127.0.0.1:9/register", "http://[::ffff:192.168.1.1]/revoke", "http://[::1]/x"],
)
def test_no_endpoint_inside_our_network_is_reached(settings, url):
    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False

    with pytest.raises(OAuthHttpError, match="private, loopback or link-local"):
        exchange("POST", url, "token endpoint", form="grant_type=refresh_token")


def test_an_authorization_server_inside_our_network_is_refused(settings):
    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False

    with pytest.raises(OAuthHttpError, match="private, loopback or link-local"):
        oauth_mcp._authorization_server_metadata("http://10.1.2.3/", "https://mcp.example.com/mcp")


def test_a_server_that_takes_client_metadata_documents_gets_ours_and_no_registration(console):
    """The specification's preferred client: our Client ID Metadata Document's URL as client_id."""
    behaviour = Behaviour(
        metadata={"client_id_metadata_document_supported": True},
        registration={"client_name": "registering would be refused here"},
    )
    with hostile(behaviour) as server:
        started = add(console, server)

    assert started.status_code == 200
    url = "http://testserver/connections/oauth/client.json"
    assert parse_qs(urlsplit(started.context["authorization_url"]).query)["client_id"] == [url]
    assert OAuthSignIn.objects.get().client_id == url
    document = Client().get("/connections/oauth/client.json").json()  # public: the server fetches it, signed out
    assert document["client_id"] == url
    assert document["redirect_uris"] == ["http://testserver/connections/oauth/callback/"]
    assert document["token_endpoint_auth_method"] == "none"


@pytest.mark.parametrize(
    ("challenge", "asked"),
    [
        ('Bearer error="insufficient_scope", scope="files:read  files:write"', "files:read files:write"),
        ('Bearer error="insufficient_scope", error_description="Required scope: files:write"', ""),
        ('Bearer realm="x",error="insufficient_scope",scope="a"', "a"),
        ('Bearer error="invalid_token", scope="files:write"', None),
        ("Basic", None),
        ('Bearer error="insufficient_scope", scope="a\\"b"', ""),  # a quote is no scope character: none named
        (f'Bearer error="insufficient_scope", scope="{"s" * 501}"', ""),  # past the bound: none named
        ('Bearer error="insufficient_scope", scope="files:write\r\nX-Evil: 1"', ""),
    ],
)
def test_a_scope_challenge_names_only_what_rfc_6749_calls_scopes(challenge, asked):
    from connections.client import scope_challenged

    assert scope_challenged(challenge) == asked
