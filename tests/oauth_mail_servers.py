"""Mail and calendar servers that take OAuth 2.0 bearer tokens, as Google's and Microsoft's do, each checking the token
with the test authorization server's introspection endpoint over HTTP (tests/oauth_server.py):

- SMTP: aiosmtpd with the SASL XOAUTH2 mechanism (and no password mechanism);
- CalDAV: Radicale behind a small WSGI proxy that takes ``Authorization: Bearer``, asks the authorization server whose
  token it is, and hands Radicale that person as the logged-in user (Radicale's ``http_x_remote_user``), laid out
  as Google's CalDAV API is: ``/<address>/events/``.

IMAP is Dovecot with its ``oauth2`` passdb: ``tests.mail_servers.dovecot(oauth2_introspection_url=...)``.
"""

import asyncio
import base64
import binascii
import json
import logging
import shutil
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any
from wsgiref.simple_server import make_server

import pytest

from tests.mail_servers import _QuietHandler, _ThreadingWSGIServer, free_port
from tests.oauth_server import RESOURCE_ID, RESOURCE_SECRET, OAuthServer, introspect, oauth_server, parse_xoauth2


def introspection_url_with_credentials(server: OAuthServer) -> str:
    """The introspection URL with the resource server's credentials in it, as Dovecot's oauth2 passdb takes it."""
    return server.introspection_url.replace("http://", f"http://{RESOURCE_ID}:{RESOURCE_SECRET}@", 1)


def _owner(server: OAuthServer, token: str) -> str:
    """The address the token was issued to, when it is active now; "" otherwise."""
    if not token:
        return ""
    answer = introspect(server, token)
    return str(answer.get("email") or "") if answer.get("active") is True else ""


@dataclass
class OAuthSmtp:
    host: str
    port: int
    received: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)  # the addresses that logged in
    refused: int = 0  # XOAUTH2 attempts refused


@contextmanager
def oauth_smtp(oauth: OAuthServer) -> Iterator[OAuthSmtp]:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import MISSING, AuthResult

    port = free_port()
    box = OAuthSmtp(host="127.0.0.1", port=port)

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.received.append(message_from_bytes(envelope.original_content or envelope.content))
            box.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            return "250 OK"

        async def auth_XOAUTH2(self, server: Any, args: list[str]) -> AuthResult:
            if len(args) > 1:  # ["XOAUTH2", initial response]
                try:
                    raw = base64.b64decode(args[1], validate=True)
                except binascii.Error:
                    return AuthResult(success=False, handled=False)
            else:
                answer = await server.challenge_auth("")
                if answer is MISSING:
                    return AuthResult(success=False, handled=True)
                raw = answer
            user, token = parse_xoauth2(raw)
            owner = await asyncio.get_running_loop().run_in_executor(None, _owner, oauth, token)
            if owner and owner == user:
                box.logins.append(user)
                return AuthResult(success=True, auth_data=user)
            box.refused += 1
            # Google's way: the error as a JSON challenge, which the client answers with an empty line; then 535.
            error = {"status": "401", "schemes": "Bearer", "scope": "https://mail.google.com/"}
            await server.challenge_auth(json.dumps(error))
            return AuthResult(success=False, handled=False)

    def no_passwords(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        return AuthResult(success=False, handled=False)

    logging.getLogger("mail.log").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        authenticator=no_passwords,
        auth_require_tls=False,  # the tests allow plaintext (MAIL_CALENDAR_ALLOW_PLAINTEXT)
        auth_required=True,
        auth_exclude_mechanism=["PLAIN", "LOGIN"],
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@dataclass
class BearerCalDav:
    url: str  # the server's root; a person's calendar is at url + "<address>/events/"
    root: Path
    tokens_seen: list[str] = field(default_factory=list)
    refused: int = 0

    def calendar_url(self, address: str) -> str:
        return f"{self.url}{address}/events/"

    def make_calendar(self, address: str, name: str = "Events") -> None:
        """The person's calendar, as Google has one for every account."""
        folder = self.root / "collection-root" / address / "events"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".Radicale.props").write_text(json.dumps({"tag": "VCALENDAR", "D:displayname": name}))

    def events(self, address: str) -> list[str]:
        folder = self.root / "collection-root" / address / "events"
        return sorted(path.read_text() for path in folder.glob("*.ics")) if folder.exists() else []


@contextmanager
def bearer_caldav(directory: Path, oauth: OAuthServer) -> Iterator[BearerCalDav]:
    import radicale as radicale_package
    from radicale import config

    configuration = config.load()
    configuration.update(
        {
            "auth": {"type": "http_x_remote_user", "delay": "0"},
            "storage": {"filesystem_folder": str(directory / "collections")},
            "rights": {"type": "owner_only"},
            "logging": {"level": "error", "mask_passwords": "True"},
        },
        "test",
        privileged=True,
    )
    logging.getLogger("radicale").setLevel(logging.WARNING)
    application = radicale_package.Application(configuration)
    state = BearerCalDav(url="", root=directory / "collections")

    def proxy(environ: dict[str, Any], start_response: Any) -> Any:
        header = str(environ.pop("HTTP_AUTHORIZATION", ""))
        environ.pop("HTTP_X_REMOTE_USER", None)  # only this proxy says who is logged in
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        owner = _owner(oauth, token)
        if not owner:
            state.refused += 1
            body = b"a valid bearer token is required"
            start_response(
                "401 Unauthorized",
                [
                    ("WWW-Authenticate", 'Bearer realm="caldav", error="invalid_token"'),
                    ("Content-Type", "text/plain"),
                    ("Content-Length", str(len(body))),
                ],
            )
            return [body]
        state.tokens_seen.append(token)
        environ["HTTP_X_REMOTE_USER"] = owner
        return application(environ, start_response)

    server = make_server("127.0.0.1", 0, proxy, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, name="bearer-caldav", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


# Fixtures (imported by the test modules that use them) -------------------------------------------------------------


def require_dovecot() -> None:
    if not (shutil.which("dovecot") or Path("/usr/sbin/dovecot").exists()):
        pytest.skip("dovecot is not installed (Debian package dovecot-imapd)")


@pytest.fixture(scope="module")
def oauth() -> Iterator[OAuthServer]:
    with oauth_server() as server:
        yield server


@pytest.fixture(scope="module")
def oauth_dovecot(oauth: OAuthServer) -> Iterator[Any]:
    require_dovecot()
    from tests.mail_servers import dovecot

    with dovecot(100, oauth2_introspection_url=introspection_url_with_credentials(oauth)) as server:
        yield server


@pytest.fixture(scope="module")
def xoauth2_smtp(oauth: OAuthServer) -> Iterator[OAuthSmtp]:
    with oauth_smtp(oauth) as server:
        yield server


@pytest.fixture
def caldav_server(tmp_path: Path, oauth: OAuthServer) -> Iterator[BearerCalDav]:
    with bearer_caldav(tmp_path, oauth) as server:
        yield server
