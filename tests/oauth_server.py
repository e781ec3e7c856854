"""A real OAuth 2.0 authorization server on 127.0.0.1 for the tests, built on Authlib's server classes: it stands in
for Google's and Microsoft's sign-in (authorization endpoint with a consent page, token endpoint with the
authorization-code grant under PKCE S256 and the refresh-token grant, an OpenID Connect ID token naming the
person's address), and offers what the mail and calendar servers of the tests check tokens with: token
introspection (RFC 7662) and revocation (RFC 7009).

Everything it holds is in memory; a test reads it (``issued``, ``refreshes``, ``revoked``) to see what went over the
wire. ``rotate_refresh_tokens`` makes it answer a refresh as Microsoft does (a new refresh token each time, the old
one spent) instead of as Google does (the same refresh token stays valid). ``one_resource_per_token`` makes it
issue tokens as Microsoft's identity platform does: an access token is for one resource (the scopes of one
``https://host/``, with the OpenID ones), a request naming scopes of two resources is refused (AADSTS28000), and a
refresh token may be redeemed for the scopes of any resource the person consented to.
"""

import base64
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import parse_qsl, urlencode
from wsgiref.simple_server import make_server

from authlib.common.encoding import json_dumps
from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import ClientMixin, InvalidRequestError, InvalidScopeError, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonRequest
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import OctKey

from tests.mail_servers import _QuietHandler, _ThreadingWSGIServer

CLIENT_ID = "test-client.apps.example"
CLIENT_SECRET = "test-client-secret-1"
# What the mail, SMTP and CalDAV servers of the tests authenticate to the introspection endpoint with.
RESOURCE_ID = "resource-server"
RESOURCE_SECRET = "resource-secret-1"


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uris: list[str] = field(default_factory=list)
    resource_server: bool = False

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0] if self.redirect_uris else ""

    def get_allowed_scope(self, scope: str) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return not self.redirect_uris or redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return not self.resource_server and response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return not self.resource_server and grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str
    code_challenge_method: str
    nonce: str | None = None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


@dataclass
class Token:
    client_id: str
    access_token: str
    scope: str
    user: str
    expires_in: int
    refresh_token: str = ""
    issued_at: float = field(default_factory=time.time)
    access_revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id or client.resource_server

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.access_revoked

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> None:
        return None


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: dict[str, str], query: dict[str, str], form: dict[str, str]):
        super().__init__(method, uri, headers=headers)
        self._args = query
        self._form = form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class OAuthServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.url = ""
        self.clients: dict[str, Client] = {
            CLIENT_ID: Client(CLIENT_ID, CLIENT_SECRET),
            RESOURCE_ID: Client(RESOURCE_ID, RESOURCE_SECRET, resource_server=True),
        }
        self.codes: dict[str, Code] = {}
        self.tokens: list[Token] = []
        self.lock = threading.Lock()
        self.signed_in = "person@example.com"  # who the consent page says is signed in
        self.access_seconds = 3600
        self.rotate_refresh_tokens = False
        self.require_refresh_scope = False  # Microsoft's v2.0 endpoint refuses a refresh that does not name scopes
        self.one_resource_per_token = False  # Microsoft's: see the module's docstring
        self.withheld: set[str] = set()  # scopes the person unticks on the consent page (Google lets them)
        self.granted: dict[tuple[str, str], set[str]] = {}  # (client, user): every scope granted so far
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.refreshes = 0  # refresh grants answered with a new token
        self.revocations: list[str] = []  # the kinds revoked ("access_token"/"refresh_token")
        self.hold_refresh: threading.Event | None = None  # a refresh waits for it (to race two workers)
        self.register_token_generator("default", self._generate)
        self.register_grant(_CodeGrant, [CodeChallenge(required=True), _OpenIDCode(self)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_Introspection)

    # Authlib's hooks ----------------------------------------------------------------------------------------

    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        with self.lock:
            self.tokens.append(
                Token(
                    client_id=request.client.client_id,
                    access_token=token["access_token"],
                    refresh_token=token.get("refresh_token", ""),
                    scope=token.get("scope", ""),
                    user=request.user,
                    expires_in=int(token["expires_in"]),
                )
            )

    def _generate(
        self,
        grant_type: str,
        client: Client,
        user: Any = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token = {
            "token_type": "Bearer",
            "access_token": "at-" + secrets.token_urlsafe(24),
            "expires_in": self.access_seconds,
            "scope": scope or "",
        }
        if include_refresh_token:
            token["refresh_token"] = "rt-" + secrets.token_urlsafe(24)
        return token

    def create_oauth2_request(self, request: _Request) -> _Request:
        return request

    def create_json_request(self, request: _Request) -> JsonRequest:
        return JsonRequest(request.method, request.uri, request.headers)

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    # What tests read ----------------------------------------------------------------------------------------

    def token(self, access_token: str) -> Token | None:
        with self.lock:
            return next((t for t in self.tokens if t.access_token == access_token), None)

    def active(self, access_token: str) -> Token | None:
        """The token, when it is valid now: issued here, not expired, not revoked."""
        found = self.token(access_token)
        return found if found is not None and not found.is_expired() and not found.access_revoked else None

    def revoke_refresh_tokens(self) -> None:
        """What the person does by removing the app's access in their account: every refresh token stops working."""
        with self.lock:
            for token in self.tokens:
                token.refresh_revoked = True

    def expire_access_tokens(self) -> None:
        with self.lock:
            for token in self.tokens:
                token.issued_at -= token.expires_in + 1

    @property
    def authorization_url(self) -> str:
        return self.url + "/authorize"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def revocation_url(self) -> str:
        return self.url + "/revoke"

    @property
    def introspection_url(self) -> str:
        return self.url + "/introspect"


def resource_of(scope: str) -> str:
    """The resource a scope is on (``https://graph.microsoft.com/Calendars.ReadWrite``: graph.microsoft.com); "" for
    the OpenID Connect scopes, which go with any."""
    return scope.split("/")[2] if scope.startswith("https://") and scope.count("/") >= 3 else ""


def _one_resource(asked: str, consented: str) -> str:
    """A token request's scopes as Microsoft reads them: of one resource (else AADSTS28000), and of what was
    consented to (else invalid_grant, AADSTS65001)."""
    wanted = asked.split()
    if len({resource_of(scope) for scope in wanted} - {""}) > 1:
        raise InvalidScopeError("AADSTS28000: the scope names more than one resource.")
    return " ".join(scope for scope in wanted if scope in set(consented.split()) or scope == "offline_access")


class _CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: OAuthServer

    def generate_token(self, user: Any = None, scope: str | None = None, **rest: Any) -> dict[str, Any]:
        asked = self.request.form.get("scope")
        if self.server.one_resource_per_token and asked:
            scope = _one_resource(asked, scope or "")
        return super().generate_token(user=user, scope=scope, **rest)

    def save_authorization_code(self, code: str, request: OAuth2Request) -> Code:
        data = request.payload.data
        scope = set((request.scope or "").split()) - self.server.withheld
        key = (request.client.client_id, request.user)
        if data.get("include_granted_scopes") == "true":  # Google's incremental consent
            scope |= self.server.granted.get(key, set())
        self.server.granted[key] = self.server.granted.get(key, set()) | scope
        item = Code(
            code=code,
            client_id=request.client.client_id,
            redirect_uri=request.payload.redirect_uri or "",
            scope=" ".join(sorted(scope)),
            user=request.user,
            code_challenge=data.get("code_challenge", ""),
            code_challenge_method=data.get("code_challenge_method", ""),
            nonce=data.get("nonce"),
        )
        self.server.codes[code] = item
        return item

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found = self.server.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> str:
        return authorization_code.user


class _OpenIDCode(OpenIDCode):  # type: ignore[misc]
    def __init__(self, server: OAuthServer) -> None:
        super().__init__(require_nonce=False)
        self.server = server

    def exists_nonce(self, nonce: str, request: OAuth2Request) -> bool:
        return False

    def get_client_algorithm(self, client: Client) -> str:
        return "HS256"

    def resolve_client_private_key(self, client: Client) -> OctKey:
        return OctKey.import_key(client.client_secret.encode() * 2)

    def get_client_claims(self, client: Client) -> dict[str, Any]:
        return {"iss": self.server.url, "aud": [client.client_id], "exp": int(time.time()) + 3600}

    def get_encode_header(self, client: Client) -> dict[str, str]:
        return {"alg": "HS256"}

    def generate_user_info(self, user: str, scope: str) -> dict[str, Any]:
        return {"sub": "sub-" + user, "email": user, "email_verified": True, "preferred_username": user}


class _RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: OAuthServer

    @property
    def INCLUDE_NEW_REFRESH_TOKEN(self) -> bool:
        return self.server.rotate_refresh_tokens

    def _validate_token_scope(self, token: Token) -> None:
        if not self.server.one_resource_per_token:
            super()._validate_token_scope(token)
            return
        # A refresh token serves every resource consented to: what was consented to bounds the scopes asked.
        consented = " ".join(self.server.granted.get((token.client_id, token.user), set()))
        asked = self.request.payload.scope or ""
        if _one_resource(asked, consented).split() != [s for s in asked.split()]:
            raise InvalidScopeError("AADSTS65001: the person has not consented to these scopes.")

    def validate_token_request(self) -> None:
        if self.server.require_refresh_scope and not self.request.payload.scope:
            # Microsoft's v2.0 endpoint: AADSTS90014, the required field 'scope' is missing
            raise InvalidRequestError("AADSTS90014: The required field 'scope' is missing.")
        super().validate_token_request()

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        if self.server.hold_refresh is not None:
            self.server.hold_refresh.wait(timeout=10)
        with self.server.lock:
            for token in self.server.tokens:
                if token.refresh_token == refresh_token and not token.refresh_revoked:
                    return token
        return None

    def authenticate_user(self, refresh_token: Token) -> str:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: Token) -> None:
        if self.server.rotate_refresh_tokens:
            refresh_token.refresh_revoked = True

    def create_token_response(self) -> Any:
        response = super().create_token_response()
        self.server.refreshes += 1
        return response


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: OAuthServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        with self.server.lock:
            for token in self.server.tokens:
                if token_string in (token.access_token, token.refresh_token):
                    return token
        return None

    def revoke_token(self, token: Token, request: OAuth2Request) -> None:
        with self.server.lock:
            self.server.revocations.append(request.form.get("token_type_hint") or "")
            # Google and RFC 7009 alike: revoking the refresh token ends the grant's access tokens too.
            for other in self.server.tokens:
                if other.user == token.user and other.client_id == token.client_id:
                    other.access_revoked = True
                    other.refresh_revoked = True


class _Introspection(IntrospectionEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: OAuthServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return self.server.token(token_string)

    def introspect_token(self, token: Token) -> dict[str, Any]:
        return {
            "active": True,
            "client_id": token.client_id,
            "token_type": "Bearer",
            "scope": token.scope,
            "username": token.user,
            "email": token.user,
            "sub": "sub-" + token.user,
            "exp": int(token.issued_at + token.expires_in),
        }

    def check_permission(self, token: Token, client: Client, request: OAuth2Request) -> bool:
        return client.resource_server


# Links, not a form: a browser applies the page's form-action policy to the redirect that follows a form's submission,
# and the browser tests hold every page to a strict one (tests/browser/conftest.py).
_CONSENT = """<!doctype html><html><head><title>Sign in to Test Accounts</title></head><body>
<h1>Test Accounts</h1><p>Signed in as <b id="who">{who}</b>.</p>
<p><b>{client}</b> asks for: <span id="scopes">{scopes}</span></p>
<p><a id="allow" href="{allow}">Allow</a> <a id="deny" href="{deny}">Deny</a></p></body></html>"""


def _application(server: OAuthServer) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        size = int(environ.get("CONTENT_LENGTH") or 0)
        form = dict(parse_qsl(environ["wsgi.input"].read(size).decode(), keep_blank_values=True)) if size else {}
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        uri = server.url + path + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else "")
        request = _Request(method, uri, headers, query, form)
        if path == "/authorize" and method == "GET" and "decision" not in query:
            server.authorize_requests.append(query)
            try:
                grant = server.get_consent_grant(request, end_user=server.signed_in)
            except Exception as error:  # an invalid request: shown, never redirected
                return _answer(start_response, 400, f"invalid authorization request: {error}".encode(), "text/plain")
            page = _CONSENT.format(
                who=escape(server.signed_in),
                client=escape(grant.client.client_id),
                scopes=escape(query.get("scope", "")),
                allow=escape("/authorize?" + urlencode({**query, "decision": "allow"})),
                deny=escape("/authorize?" + urlencode({**query, "decision": "deny"})),
            )
            return _answer(start_response, 200, page.encode(), "text/html; charset=utf-8")
        if path == "/authorize" and method == "GET":
            user = server.signed_in if query.get("decision") == "allow" else None
            grant = server.get_consent_grant(request, end_user=user)
            status, body, out = server.create_authorization_response(request, grant_user=user, grant=grant)
            return _respond(start_response, status, body, out)
        if path == "/token" and method == "POST":
            server.token_requests.append(form)
            return _respond(start_response, *server.create_token_response(request))
        if path == "/revoke" and method == "POST":
            return _respond(start_response, *server.create_endpoint_response("revocation", request))
        if path == "/introspect" and method == "POST":
            return _respond(start_response, *server.create_endpoint_response("introspection", request))
        return _answer(start_response, 404, b"not found", "text/plain")

    return app


def _answer(start_response: Any, status: int, body: bytes, kind: str) -> list[bytes]:
    start_response(f"{status} X", [("Content-Type", kind), ("Content-Length", str(len(body)))])
    return [body]


def _respond(start_response: Any, status: int, body: Any, headers: Any) -> list[bytes]:
    raw = (json_dumps(body) if isinstance(body, (dict, list)) else body or "").encode()
    out = [(k, v) for k, v in headers if k.lower() != "content-length"]
    if isinstance(body, (dict, list)) and not any(k.lower() == "content-type" for k, _ in out):
        out.append(("Content-Type", "application/json"))
    start_response(f"{status} X", [*out, ("Content-Length", str(len(raw)))])
    return [raw]


@contextmanager
def oauth_server() -> Iterator[OAuthServer]:
    server = OAuthServer()
    http = make_server(
        "127.0.0.1", 0, _application(server), server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
    )
    server.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, name="oauth-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        http.server_close()


def xoauth2_string(user: str, token: str) -> bytes:
    """The SASL XOAUTH2 initial response, as the clients send it."""
    return f"user={user}\x01auth=Bearer {token}\x01\x01".encode()


def parse_xoauth2(raw: bytes) -> tuple[str, str]:
    """(user, token) from an XOAUTH2 initial response; ("", "") when it is not one."""
    fields = dict(part.split("=", 1) for part in raw.decode(errors="replace").split("\x01") if "=" in part)
    token = fields.get("auth", "")
    return fields.get("user", ""), token[7:] if token.startswith("Bearer ") else ""


def introspect(server: OAuthServer, token: str) -> dict[str, Any]:
    """Ask the server's introspection endpoint about a token, as a resource server does (over HTTP)."""
    import requests

    answer = requests.post(
        server.introspection_url, data={"token": token}, auth=(RESOURCE_ID, RESOURCE_SECRET), timeout=5
    )
    return dict(answer.json())


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def authorize_query(url: str, **extra: str) -> str:
    return url + "?" + urlencode(extra)
