"""An OAuth grant's tokens: stored encrypted, handed out fresh, refreshed by one worker at a time, revoked.

``access_token(grant_id)`` is what a tool call asks for: the stored access token while it has more than
OAUTH_REFRESH_MARGIN_SECONDS left, else a refreshed one. After the server refused a token with a 401, the caller
asks again with ``rejected=`` that token: it is refreshed once (or, when another worker refreshed meanwhile, the
newer token is returned).

Refreshing is serialised without holding a transaction across the HTTP exchange: a worker first takes the grant's
refresh lease with one conditional UPDATE (only over the version it read, only when no unexpired lease is held), so
of two workers racing exactly one spends the refresh token; the other waits until the version changes and uses the
tokens the first stored. Every database step is short and goes through ``ops.database_work.database`` (a delivery
attempt's thread holds no connection of its own).

A grant whose provider issues one access token per resource (Microsoft: the mailbox's on outlook.office.com, the
calendar's on Graph) keeps the other resources' access tokens in ``OAuthResourceToken`` rows: ``access_token(grant_id,
scope=...)`` hands out the one for those scopes, and refreshes it by redeeming the grant's one refresh token for those
scopes alone, under the same lease and version (a rotated refresh token is the grant's, whichever token asked).

When the authorization server refuses the refresh (invalid_grant: revoked, expired, or spent), the grant is marked
"sign in again" and ``SignInAgain`` raised; the console shows it and the assistant says so. A server that cannot be
reached raises ``TokenUnavailable`` and changes nothing.
"""

import logging
import secrets
import time
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7009 import prepare_revoke_token_request
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from connections import crypto
from connections.models import GrantKind, GrantStatus, OAuthGrant, OAuthResourceToken
from connections.oauth.http import Answer, OAuthHttpError, exchange
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_TOKEN_LENGTH = 16_000  # a JWT with many claims fits; a token endpoint's essay does not


class SignInAgain(Exception):
    """The grant's tokens can no longer be used or refreshed: the person must sign in again (the text says why)."""


class GrantRefused(OAuthHttpError):
    """The token endpoint refused the grant itself (RFC 6749 section 5.2: invalid_grant, invalid_client, ...)."""


class TokenUnavailable(Exception):
    """No usable token right now (the authorization server unreachable, another refresh that did not finish); the
    grant is unchanged and a later call may succeed."""


@dataclass(frozen=True, slots=True)
class Tokens:
    """A token endpoint's answer (RFC 6749 section 5.1), checked."""

    access_token: str
    refresh_token: str
    expires_in: int | None
    scope: str


@dataclass(frozen=True, slots=True)
class Client:
    """The OAuth client a grant's tokens were issued to, as the token endpoint authenticates it."""

    client_id: str
    client_secret: str = ""
    auth_method: str = "none"  # none | client_secret_post | client_secret_basic


def parse_tokens(answer: Answer, label: str = "token endpoint") -> Tokens:
    """The tokens of a successful token-endpoint answer; OAuthHttpError when it is not one."""
    from mcp.shared.auth import OAuthToken  # the SDK's model of RFC 6749 section 5.1

    if answer.status in (400, 401):
        raise GrantRefused(f"The {label} refused: {error_text(answer)}")
    if answer.status != 200:
        raise OAuthHttpError(f"The {label} answered HTTP {answer.status}.")
    found = answer.json_object()
    try:
        token = OAuthToken.model_validate(found)
    except ValidationError:
        raise OAuthHttpError(f"The {label} did not answer with a bearer access token.") from None
    if not token.access_token or len(token.access_token) > MAX_TOKEN_LENGTH or not token.access_token.isprintable():
        raise OAuthHttpError(f"The {label} answered an access token we cannot use.")
    refresh = token.refresh_token or ""
    if len(refresh) > MAX_TOKEN_LENGTH or not refresh.isprintable():
        raise OAuthHttpError(f"The {label} answered a refresh token we cannot use.")
    expires_in = token.expires_in if token.expires_in is not None and token.expires_in > 0 else None
    return Tokens(token.access_token, refresh, expires_in, (token.scope or "")[:2000])


def error_text(answer: Answer) -> str:
    """An OAuth error answer (RFC 6749 section 5.2) as a short sentence: its code and description, cleaned."""
    found = answer.json_object() or {}
    code = found.get("error")
    description = found.get("error_description")
    parts = [_clean(code, 60) if isinstance(code, str) else f"HTTP {answer.status}"]
    if isinstance(description, str) and description.strip():
        parts.append(_clean(description, 200))
    return " — ".join(part for part in parts if part)


def _clean(text: str, limit: int) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def expiry(tokens: Tokens) -> datetime | None:
    return timezone.now() + timedelta(seconds=tokens.expires_in) if tokens.expires_in else None


def token_request(token_endpoint: str, client: Client, form: dict[str, str], label: str = "token endpoint") -> Tokens:
    """POST a grant to the token endpoint with the client's authentication (Authlib encodes both)."""
    body = prepare_token_request(form.pop("grant_type"), **form)
    return parse_tokens(_post_authenticated(token_endpoint, client, body, label), label)


def _post_authenticated(url: str, client: Client, body: str, label: str) -> Answer:
    auth = ClientAuth(client.client_id, client.client_secret, client.auth_method)
    _uri, headers, encoded = auth.prepare("POST", url, {}, body)
    return exchange("POST", url, label, form=encoded, headers=dict(headers))


# --- storing ------------------------------------------------------------------------------------------------------


def store_grant(
    owner_id: int,
    kind: str,
    *,
    client: Client,
    token_endpoint: str,
    tokens: Tokens,
    issuer: str = "",
    revocation_endpoint: str = "",
    resource: str = "",
    scope: str = "",
) -> OAuthGrant:
    """A new grant from a finished sign-in (inside the caller's transaction, with whatever it belongs to)."""
    return OAuthGrant.objects.create(
        owner_id=owner_id,
        kind=kind,
        issuer=issuer[:2000],
        token_endpoint=token_endpoint,
        revocation_endpoint=revocation_endpoint,
        client_id=client.client_id,
        client_secret_encrypted=crypto.encrypt(client.client_secret),
        token_auth_method=client.auth_method,
        resource=resource,
        scope=(tokens.scope or scope)[:2000],
        access_token_encrypted=crypto.encrypt(tokens.access_token),
        refresh_token_encrypted=crypto.encrypt(tokens.refresh_token),
        expires_at=expiry(tokens),
        refreshed_at=timezone.now(),
    )


def redeem(token_endpoint: str, client: Client, refresh_token: str, scope: str) -> Tokens:
    """A refresh token redeemed for ``scope`` (one resource's scopes: Microsoft issues a token for one resource per
    request, and a refresh token for any resource consented to); offline_access keeps a refresh token coming."""
    wanted = " ".join(dict.fromkeys([*scope.split(), "offline_access"]))
    return token_request(
        token_endpoint, client, {"grant_type": "refresh_token", "refresh_token": refresh_token, "scope": wanted}
    )


def store_resource_token(grant: OAuthGrant, scope: str, tokens: Tokens) -> None:
    """The access token for another resource (``scope``) of a grant, in place of any earlier one."""
    OAuthResourceToken.objects.update_or_create(
        grant=grant,
        scope=scope,
        defaults={"access_token_encrypted": crypto.encrypt(tokens.access_token), "expires_at": expiry(tokens)},
    )


def replace_tokens(grant: OAuthGrant, tokens: Tokens, asked: str = "") -> None:
    """A new sign-in's tokens for an existing grant (after "sign in again"): active again, a new version. Its scope
    is what the server says it granted, else what the sign-in asked for (``asked``); what was wanted is asked no
    more (a server that granted less asks again with its next 403)."""
    grant.access_token_encrypted = crypto.encrypt(tokens.access_token)
    grant.refresh_token_encrypted = crypto.encrypt(tokens.refresh_token)
    grant.expires_at = expiry(tokens)
    grant.scope = tokens.scope[:2000] or asked[:2000] or grant.scope
    grant.scope_wanted = ""
    grant.status, grant.status_detail = GrantStatus.ACTIVE, ""
    grant.version += 1
    grant.refresh_lease, grant.refresh_lease_until = "", None
    grant.refreshed_at = timezone.now()
    grant.save()
    grant.resource_tokens.all().delete()  # issued under the old sign-in: fetched again from the new refresh token


def replace_refresh_token(grant: OAuthGrant, refresh_token: str) -> None:
    """A sign-in that added another resource's capability (Microsoft's calendar to a connected mailbox): its refresh
    token is the grant's from now on (the earlier one may be spent), and the grant's own access token stays."""
    if refresh_token:
        grant.refresh_token_encrypted = crypto.encrypt(refresh_token)
    grant.status, grant.status_detail = GrantStatus.ACTIVE, ""
    grant.version += 1
    grant.refresh_lease, grant.refresh_lease_until = "", None
    grant.save()


def client_of(grant: OAuthGrant) -> Client:
    return Client(grant.client_id, crypto.decrypt(grant.client_secret_encrypted), grant.token_auth_method)


# --- handing out and refreshing -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Snapshot:
    version: int
    status: str
    status_detail: str
    access_token_encrypted: str
    refresh_token_encrypted: str
    expires_at: datetime | None


def _snapshot(grant_id: int) -> _Snapshot:
    row = OAuthGrant.objects.filter(pk=grant_id).values(*(field.name for field in fields(_Snapshot))).first()
    if row is None:
        raise SignInAgain("This sign-in was removed; connect the server again.")
    return _Snapshot(**row)


def _fresh(expires_at: datetime | None) -> bool:
    margin = timedelta(seconds=float(settings.OAUTH_REFRESH_MARGIN_SECONDS))
    return expires_at is None or expires_at > timezone.now() + margin


def _held(snapshot: _Snapshot, grant_id: int, scope: str) -> tuple[str, datetime | None]:
    """The access token held for the grant's own resource, or for ``scope``'s ("" when none), and its expiry."""
    if scope:
        row = OAuthResourceToken.objects.filter(grant_id=grant_id, scope=scope).values_list(
            "access_token_encrypted", "expires_at"
        )
        found = row.first()
        if found is None:
            return "", None
        encrypted, expires_at = found
    else:
        encrypted, expires_at = snapshot.access_token_encrypted, snapshot.expires_at
    try:
        return crypto.decrypt(encrypted), expires_at
    except crypto.UnreadableSecret:
        return "", None


def access_token(grant_id: int, *, rejected: str | None = None, scope: str = "") -> str:
    """A usable access token for the grant (refreshed first when it expires soon, or when it is ``rejected``); with
    ``scope``, the token for another resource's scopes (``OAuthResourceToken``)."""
    deadline = time.monotonic() + float(settings.OAUTH_TIMEOUT_SECONDS) + 5
    while True:
        snapshot = database(_snapshot, grant_id)
        if snapshot.status == GrantStatus.SIGN_IN_AGAIN:
            raise SignInAgain(snapshot.status_detail or "The sign-in has expired; sign in again.")
        token, expires_at = database(_held, snapshot, grant_id, scope)
        if token and token != rejected and _fresh(expires_at):
            return token
        if not snapshot.refresh_token_encrypted:
            detail = "The server's access token expired and it gave no refresh token; sign in again."
            database(_mark_sign_in_again, grant_id, snapshot.version, detail)
            continue  # read again: another worker may have stored new tokens meanwhile
        lease = secrets.token_hex(16)
        if database(_take_lease, grant_id, snapshot.version, lease):
            return _refresh(grant_id, snapshot, lease, scope)
        if time.monotonic() > deadline:
            raise TokenUnavailable("Another refresh of this sign-in did not finish in time.")
        time.sleep(0.1)  # another worker is refreshing: its tokens are stored within the lease


def _lease_seconds() -> float:
    return float(settings.OAUTH_TIMEOUT_SECONDS) + 5


def _take_lease(grant_id: int, version: int, lease: str) -> bool:
    """The right to spend the refresh token: only over the version read, only when no live lease is held."""
    now = timezone.now()
    return bool(
        OAuthGrant.objects.filter(pk=grant_id, version=version, status=GrantStatus.ACTIVE)
        .filter(Q(refresh_lease_until__isnull=True) | Q(refresh_lease_until__lt=now))
        .update(refresh_lease=lease, refresh_lease_until=now + timedelta(seconds=_lease_seconds()))
    )


def _refresh(grant_id: int, snapshot: _Snapshot, lease: str, scope: str = "") -> str:
    grant = database(OAuthGrant.objects.get, pk=grant_id)
    form = {"grant_type": "refresh_token", "refresh_token": crypto.decrypt(snapshot.refresh_token_encrypted)}
    if grant.resource:
        form["resource"] = grant.resource  # RFC 8707: the token stays bound to the same server
    if scope:  # another resource's token: its scopes alone, and offline_access for the next refresh token
        form["scope"] = " ".join(dict.fromkeys([*scope.split(), "offline_access"]))
    elif grant.kind == GrantKind.MICROSOFT and grant.scope:
        # Microsoft's v2.0 endpoint wants the scopes again on a refresh (it answers AADSTS90014 without them), and
        # offline_access among them for the next refresh token.
        form["scope"] = " ".join(dict.fromkeys([*grant.scope.split(), "offline_access"]))
    try:
        tokens = token_request(grant.token_endpoint, client_of(grant), form)
    except GrantRefused as refused:
        detail = f"The server refused to renew the sign-in; sign in again. ({refused})"
        database(_mark_sign_in_again, grant_id, snapshot.version, detail)
        logger.info("oauth grant %s: refresh refused, sign-in needed", grant_id)
        raise SignInAgain(detail) from None
    except OAuthHttpError as failed:
        database(_release, grant_id, lease)
        raise TokenUnavailable(str(failed)) from None
    stored = (
        database(_store_refreshed_for, grant_id, snapshot, lease, tokens, scope)
        if scope
        else database(_store_refreshed, grant_id, snapshot, lease, tokens)
    )
    if not stored:
        raise TokenUnavailable("The refreshed sign-in could not be stored (the connection changed meanwhile).")
    logger.info("oauth grant %s refreshed", grant_id)
    return tokens.access_token


def _store_refreshed(grant_id: int, snapshot: _Snapshot, lease: str, tokens: Tokens) -> bool:
    changes: dict[str, Any] = {
        "access_token_encrypted": crypto.encrypt(tokens.access_token),
        "expires_at": expiry(tokens),
        "version": snapshot.version + 1,
        "refresh_lease": "",
        "refresh_lease_until": None,
        "refreshed_at": timezone.now(),
    }
    if tokens.refresh_token:  # rotated (OAuth 2.1 for public clients); otherwise the old one stays valid
        changes["refresh_token_encrypted"] = crypto.encrypt(tokens.refresh_token)
    return bool(OAuthGrant.objects.filter(pk=grant_id, version=snapshot.version, refresh_lease=lease).update(**changes))


def _store_refreshed_for(grant_id: int, snapshot: _Snapshot, lease: str, tokens: Tokens, scope: str) -> bool:
    """Another resource's refreshed token: the grant's version (and its refresh token, when rotated) moves on as for
    its own, and the token is kept in its OAuthResourceToken row, in one transaction."""
    changes: dict[str, Any] = {
        "version": snapshot.version + 1,
        "refresh_lease": "",
        "refresh_lease_until": None,
        "refreshed_at": timezone.now(),
    }
    if tokens.refresh_token:
        changes["refresh_token_encrypted"] = crypto.encrypt(tokens.refresh_token)
    with transaction.atomic():
        if not OAuthGrant.objects.filter(pk=grant_id, version=snapshot.version, refresh_lease=lease).update(**changes):
            return False
        store_resource_token(OAuthGrant(pk=grant_id), scope, tokens)
    return True


def _release(grant_id: int, lease: str) -> None:
    OAuthGrant.objects.filter(pk=grant_id, refresh_lease=lease).update(refresh_lease="", refresh_lease_until=None)


def _mark_sign_in_again(grant_id: int, version: int, detail: str) -> None:
    OAuthGrant.objects.filter(pk=grant_id, version=version).update(
        status=GrantStatus.SIGN_IN_AGAIN,
        status_detail=detail[:1000],
        version=version + 1,
        refresh_lease="",
        refresh_lease_until=None,
    )


# --- revoking -----------------------------------------------------------------------------------------------------


def revoke_unstored(issued: Tokens, **client: Any) -> None:
    """Revoke tokens issued to a sign-in we will not keep (best effort), through a grant never saved: ``client``
    names its revocation endpoint and client (OAuthGrant's fields)."""
    access, refresh = crypto.encrypt(issued.access_token), crypto.encrypt(issued.refresh_token)
    revoke(OAuthGrant(access_token_encrypted=access, refresh_token_encrypted=refresh, **client))


def revoke(grant: OAuthGrant) -> bool:
    """Revoke the grant's tokens at its RFC 7009 endpoint, the refresh token first (revoking it ends the access
    tokens issued from it at most servers); False when the server offers none or refused. Call it before deleting
    the grant; a failure here never keeps a person from removing a connection."""
    if not grant.revocation_endpoint:
        return False
    try:
        client = client_of(grant)
        pairs = [
            (crypto.decrypt(grant.refresh_token_encrypted), "refresh_token"),
            (crypto.decrypt(grant.access_token_encrypted), "access_token"),
        ]
    except crypto.UnreadableSecret:
        return False
    done = False
    for token, hint in pairs:
        if not token:
            continue
        body, _headers = prepare_revoke_token_request(token, hint)
        try:
            answer = _post_authenticated(grant.revocation_endpoint, client, body, "revocation endpoint")
        except OAuthHttpError as failed:
            logger.info("oauth grant %s: revocation failed: %s", grant.pk, failed)
            continue
        done = done or answer.status == 200
    return done
