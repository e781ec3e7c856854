"""Signing in to an MCP server with OAuth, per the MCP authorization specification (docs/howto/mcp-connections.md).

``offers_oauth(url)``: whether a server that answered 401 says how to sign in (RFC 9728 metadata).
``begin(...)``: discover the server's protected-resource metadata (from ``WWW-Authenticate: Bearer
resource_metadata=…`` or the well-known paths) and its authorization server's metadata (RFC 8414, or OpenID
discovery), register a client (RFC 7591) when the server offers it (else use the client id and secret the person
pasted), and build the authorization request: code flow with PKCE S256, the RFC 8707 ``resource``, the scopes the
server asks for, a random ``state``. The sign-in under way is stored (``OAuthSignIn``) with only the state's digest.
``finish(...)``: take that sign-in once (its state, its owner, the browser session's digest), check the callback
(an error or denial is reported as the server said it, RFC 9207 ``iss``), and exchange the code.

The protocol's pieces come from the `mcp` SDK (discovery URLs, the metadata and registration models, PKCE, scope
selection) and Authlib (the authorization and token requests); this module only drives them over our bounded,
address-checked HTTP (connections/oauth/http.py) and keeps the state in our models.
"""

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx2
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from django.db import transaction
from django.utils import timezone
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    issuers_match,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp_types import LATEST_PROTOCOL_VERSION
from pydantic import ValidationError

from connections import crypto
from connections.models import Connection, GrantKind, OAuthSignIn
from connections.oauth.http import OAuthHttpError, check_endpoint, exchange, http_allowed
from connections.oauth.tokens import Client, GrantRefused, Tokens, error_text, token_request

SIGN_IN_MINUTES = 10  # how long a sign-in under way may wait for the person to come back
MAX_CLIENT_ID_LENGTH = 2000
MAX_CODE_LENGTH = 2000
CLIENT_NAME = "Poke-compatible assistant"
_VERSION = {"MCP-Protocol-Version": LATEST_PROTOCOL_VERSION}  # on discovery requests too, as the specification asks


class SignInRefused(Exception):
    """The sign-in cannot start or finish; the text says why, plainly, and never holds a token or a secret."""


class ClientCredentialsNeeded(SignInRefused):
    """The server signs in with OAuth but offers no client registration: the person must paste a client id (and
    secret) made in the server's developer console, with our callback as the redirect URI."""


@dataclass(frozen=True, slots=True)
class Discovery:
    server_url: str
    resource: str  # RFC 8707
    scope: str
    metadata: OAuthMetadata


# --- discovery ----------------------------------------------------------------------------------------------------


def _challenge(server_url: str) -> httpx2.Response | None:
    """The server's answer to an initialize request without a token: a 401 carries WWW-Authenticate."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": LATEST_PROTOCOL_VERSION}
    answer = exchange("POST", server_url, "MCP server", body=body, headers=headers, secure=False)
    if answer.status not in (401, 403):
        return None
    return httpx2.Response(answer.status, headers=answer.headers)


def _resource_metadata(server_url: str, challenge: httpx2.Response | None) -> ProtectedResourceMetadata | None:
    header_url = extract_resource_metadata_from_www_auth(challenge) if challenge is not None else None
    for url in build_protected_resource_metadata_discovery_urls(header_url, server_url):
        try:
            answer = exchange("GET", url, "protected-resource metadata", headers=_VERSION, secure=False)
        except OAuthHttpError:
            if url == header_url:
                raise  # the server named it: its refusal (a private address, a timeout) is the answer
            continue
        if answer.status != 200:
            continue
        try:
            found = ProtectedResourceMetadata.model_validate_json(answer.body)
        except ValidationError:
            continue
        # RFC 9728 section 3.3: the metadata must be about this server, or a token for it could be sent elsewhere.
        if not check_resource_allowed(resource_url_from_server_url(server_url), str(found.resource)):
            raise SignInRefused(
                f"The server's OAuth metadata is about another resource ({_short(str(found.resource))}); "
                "not signing in."
            )
        return found
    return None


def _authorization_server_metadata(auth_server: str | None, server_url: str) -> OAuthMetadata:
    for url in build_oauth_authorization_server_metadata_discovery_urls(auth_server, server_url):
        answer = exchange("GET", url, "authorization server metadata", headers=_VERSION, secure=False)
        if answer.status == 200:
            try:
                found = OAuthMetadata.model_validate_json(answer.body)
            except ValidationError:
                raise SignInRefused("The authorization server's metadata is not valid RFC 8414 metadata.") from None
            if auth_server and not issuers_match(str(found.issuer), auth_server):
                raise SignInRefused("The authorization server's metadata names another issuer; not signing in.")
            return found
        if answer.status >= 500:
            break
    raise SignInRefused("The server asks for a sign-in but its authorization server publishes no metadata.")


def offers_oauth(server_url: str) -> bool:
    """Whether a server that refused us without a key publishes how to sign in with OAuth."""
    try:
        return _resource_metadata(server_url, _challenge(server_url)) is not None
    except (OAuthHttpError, SignInRefused):
        return False


def discover(server_url: str) -> Discovery:
    try:
        challenge = _challenge(server_url)
        resource_metadata = _resource_metadata(server_url, challenge)
        auth_server = str(resource_metadata.authorization_servers[0]) if resource_metadata else None
        metadata = _authorization_server_metadata(auth_server, server_url)
    except OAuthHttpError as failed:
        raise SignInRefused(str(failed)) from None
    if "code" not in metadata.response_types_supported:
        raise SignInRefused("The authorization server does not offer the authorization code flow.")
    # The MCP specification: without S256 advertised, PKCE cannot be relied on, and the client must not go on.
    if "S256" not in (metadata.code_challenge_methods_supported or []):
        raise SignInRefused("The authorization server does not support PKCE with S256; signing in would be unsafe.")
    scope = get_client_metadata_scopes(
        extract_scope_from_www_auth(challenge) if challenge is not None else None,
        resource_metadata,
        metadata,
        ["authorization_code", "refresh_token"],
    )
    resource = resource_url_from_server_url(server_url)
    if resource_metadata is not None and check_resource_allowed(resource, str(resource_metadata.resource)):
        resource = str(resource_metadata.resource)
    return Discovery(server_url=server_url, resource=resource, scope=(scope or "").strip(), metadata=metadata)


# --- the client ---------------------------------------------------------------------------------------------------


def _secret_method(metadata: OAuthMetadata) -> str:
    """How to send a pasted client's secret: in the form when the server says it takes that (the secret then needs
    no encoding rules the two sides might read differently), else HTTP Basic, RFC 8414's default."""
    offered = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    return "client_secret_post" if "client_secret_post" in offered else "client_secret_basic"


def pasted_client(metadata: OAuthMetadata, client_id: str, client_secret: str) -> Client:
    client_id, client_secret = client_id.strip(), client_secret.strip()
    if len(client_id) > MAX_CLIENT_ID_LENGTH or not client_id.isprintable():
        raise SignInRefused(f"The client ID must be printable text of at most {MAX_CLIENT_ID_LENGTH} characters.")
    if len(client_secret) > MAX_CLIENT_ID_LENGTH or not client_secret.isprintable():
        raise SignInRefused(f"The client secret must be printable text of at most {MAX_CLIENT_ID_LENGTH} characters.")
    return Client(client_id, client_secret, _secret_method(metadata) if client_secret else "none")


def register(metadata: OAuthMetadata, redirect_uri: str, scope: str) -> Client:
    """A client of our own at the server (RFC 7591); ClientCredentialsNeeded when it offers no registration."""
    if metadata.registration_endpoint is None:
        raise ClientCredentialsNeeded(
            "This server signs in with OAuth but does not register clients itself: create an OAuth client in its "
            f"developer console with the redirect URI {redirect_uri}, then paste its client ID and secret here."
        )
    offered = metadata.token_endpoint_auth_methods_supported or []
    method = "none" if "none" in offered else ("client_secret_post" if "client_secret_post" in offered else None)
    request = OAuthClientMetadata.model_validate(
        {
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": method or "client_secret_basic",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "client_name": CLIENT_NAME,
            "application_type": "web",
            **({"scope": scope} if scope else {}),
        }
    )
    try:
        answer = exchange(
            "POST",
            str(metadata.registration_endpoint),
            "registration endpoint",
            body=request.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
    except OAuthHttpError as failed:
        raise SignInRefused(str(failed)) from None
    if answer.status not in (200, 201):
        raise SignInRefused(f"The server refused to register this app: {error_text(answer)}")
    found = answer.json_object()
    if found is not None:
        found.pop("issuer", None)  # the SDK's own field, never the server's to set
    try:
        registered = OAuthClientInformationFull.model_validate(found)
    except ValidationError:
        raise SignInRefused("The server's registration answer has no client ID; not signing in.") from None
    client_id = registered.client_id
    if not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH or not client_id.isprintable():
        raise SignInRefused("The server's registration answer has no usable client ID; not signing in.")
    auth_method = registered.token_endpoint_auth_method or "client_secret_basic"
    if auth_method not in ("none", "client_secret_post", "client_secret_basic"):
        raise SignInRefused(f"The server registered this app for a client authentication we do not do ({auth_method}).")
    secret = registered.client_secret or ""
    if auth_method != "none" and not secret:
        raise SignInRefused("The server registered this app without the client secret it requires.")
    return Client(client_id, secret, auth_method)


def usable_metadata_url(url: str) -> bool:
    """Whether our metadata document's URL can serve as a client id: https with a path (plain http only where
    OAUTH_ALLOW_HTTP is on, for development)."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and http_allowed())


def client_metadata(client_metadata_url: str, redirect_uri: str) -> dict[str, Any]:
    """Our Client ID Metadata Document: who we are to an authorization server that fetches it."""
    return {
        "client_id": client_metadata_url,
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    }


# --- the sign-in under way ----------------------------------------------------------------------------------------


def digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Started:
    authorization_url: str
    state_digest: str  # for the person's session


def joined_scopes(*scopes: str) -> str:
    """Space-separated scopes, each once, in the order first given."""
    return " ".join(dict.fromkeys(s for scope in scopes for s in scope.split()))


def begin(
    owner_id: int,
    *,
    redirect_uri: str,
    server_url: str,
    name: str = "",
    connection: Connection | None = None,
    client: Client | None = None,
    client_id: str = "",
    client_secret: str = "",
    client_metadata_url: str = "",
    more_scope: str = "",
) -> Started:
    """Discover, pick the client, store the sign-in under way and build the URL to send the person's browser to.

    The client, in the specification's order: the stored one (signing in again) or the one the person pasted; else
    our Client ID Metadata Document (``client_metadata_url``, when the server says it takes one); else one the
    server registers for us (RFC 7591); else ClientCredentialsNeeded."""
    found = discover(server_url)
    if more_scope.split():  # signing in again: what the last sign-in had, and what the server asked for since
        found = Discovery(found.server_url, found.resource, joined_scopes(found.scope, more_scope), found.metadata)
    metadata = found.metadata
    try:
        authorization_endpoint = check_endpoint(str(metadata.authorization_endpoint), "authorization endpoint")
        token_endpoint = check_endpoint(str(metadata.token_endpoint), "token endpoint")
        revocation_endpoint = (
            check_endpoint(str(metadata.revocation_endpoint), "revocation endpoint")
            if metadata.revocation_endpoint
            else ""
        )
    except OAuthHttpError as refused:
        raise SignInRefused(str(refused)) from None
    if client is None:
        if client_id.strip():
            client = pasted_client(metadata, client_id, client_secret)
        elif metadata.client_id_metadata_document_supported and usable_metadata_url(client_metadata_url):
            client = Client(client_metadata_url, "", "none")
        else:
            client = register(metadata, redirect_uri, found.scope)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    extra: dict[str, Any] = {"code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
    if found.resource:
        extra["resource"] = found.resource
    url = prepare_grant_uri(
        authorization_endpoint,
        client.client_id,
        "code",
        redirect_uri=redirect_uri,
        scope=found.scope or None,
        state=state,
        **extra,
    )
    OAuthSignIn.objects.filter(owner_id=owner_id, created_at__lt=_oldest_live()).delete()
    OAuthSignIn.objects.create(
        owner_id=owner_id,
        state_digest=digest(state),
        kind=GrantKind.MCP,
        connection=connection,
        name=name,
        server_url=server_url,
        redirect_uri=redirect_uri,
        code_verifier_encrypted=crypto.encrypt(pkce.code_verifier),
        issuer=str(metadata.issuer),
        issuer_in_response=bool(metadata.authorization_response_iss_parameter_supported),
        token_endpoint=token_endpoint,
        revocation_endpoint=revocation_endpoint,
        client_id=client.client_id,
        client_secret_encrypted=crypto.encrypt(client.client_secret),
        token_auth_method=client.auth_method,
        resource=found.resource,
        scope=found.scope,
    )
    return Started(authorization_url=url, state_digest=digest(state))


def _oldest_live() -> Any:
    return timezone.now() - timedelta(minutes=SIGN_IN_MINUTES)


def prune_sign_ins() -> int:
    """Delete the sign-ins nobody can finish any more (``pruneoauthsignins``, hourly in the worker)."""
    return OAuthSignIn.objects.filter(created_at__lt=_oldest_live()).delete()[0]


def take(owner_id: int, state: object, session_digests: list[str]) -> OAuthSignIn:
    """The sign-in this callback ends, removed so that it counts once: it must be the person's, started in this
    browser session, and recent. SignInRefused otherwise (a foreign, forged, reused or stale state)."""
    if not isinstance(state, str) or not state or len(state) > 200:
        raise SignInRefused("This sign-in link carries no valid state; start the sign-in again from Connections.")
    state_digest = digest(state)
    if state_digest not in session_digests:
        raise SignInRefused("This sign-in was not started in this browser session; start it again from Connections.")
    with transaction.atomic():
        found = OAuthSignIn.objects.select_for_update().filter(owner_id=owner_id, state_digest=state_digest).first()
        if found is None or not OAuthSignIn.objects.filter(pk=found.pk).delete()[0]:
            raise SignInRefused("This sign-in was already used or has expired; start it again from Connections.")
    if found.created_at < _oldest_live():
        raise SignInRefused(f"This sign-in took longer than {SIGN_IN_MINUTES} minutes; start it again.")
    return found


def finish(sign_in: OAuthSignIn, params: dict[str, str]) -> Tokens:
    """The tokens for a callback's code; SignInRefused with the server's own words for an error or a denial."""
    error = params.get("error")
    if error:
        description = params.get("error_description", "")
        said = "".join(ch if ch.isprintable() else " " for ch in f"{error} {description}".strip())[:300]
        if error == "access_denied":
            raise SignInRefused(f"The sign-in was declined at the server ({said}). Nothing was connected.")
        raise SignInRefused(f"The server's sign-in page answered with an error: {said}. Nothing was connected.")
    iss = params.get("iss")
    if iss is not None and not issuers_match(iss, sign_in.issuer):
        raise SignInRefused("The sign-in came back from another authorization server (RFC 9207 iss); refused.")
    if iss is None and sign_in.issuer_in_response:
        raise SignInRefused("The sign-in came back without the issuer its server promised (RFC 9207); refused.")
    code = params.get("code", "")
    if not code or len(code) > MAX_CODE_LENGTH or not code.isprintable():
        raise SignInRefused("The server sent no authorization code back; nothing was connected.")
    client = Client(sign_in.client_id, crypto.decrypt(sign_in.client_secret_encrypted), sign_in.token_auth_method)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": sign_in.redirect_uri,
        "code_verifier": crypto.decrypt(sign_in.code_verifier_encrypted),
    }
    if sign_in.resource:
        form["resource"] = sign_in.resource
    try:
        return token_request(sign_in.token_endpoint, client, form)
    except GrantRefused as refused:
        raise SignInRefused(f"The server refused the sign-in's code. {refused}") from None
    except OAuthHttpError as failed:
        raise SignInRefused(str(failed)) from None


def _short(text: str, limit: int = 120) -> str:
    text = json.dumps(text)[1:-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"
