"""A Google or Microsoft mailbox and calendar signed in to with OAuth 2.0 (the operator's OAuth app): the sign-in,
the tokens the mail and calendar clients use, and removal.

The sign-in is the authorization-code flow with PKCE S256 (Authlib builds the request and the challenge). What it
needs to finish (the ``state``, the code verifier, the scopes asked) is kept in the person's own session under the
state, and taken out on the first callback that names it: a callback with a state this session did not start, or
one already used, is refused and nothing is exchanged. The code is exchanged at the provider's token endpoint
(connections/oauth/http.py: bounded in time and bytes), the ID token tells which address was signed in to, and the
servers are logged in to (IMAP and SMTP with XOAUTH2, CalDAV or Microsoft Graph with the bearer token) before
anything is stored.

Microsoft issues an access token for one resource at a time: the sign-in's token is the mailbox's (outlook.office.com)
when mail is asked for, and the calendar's token for Graph is the sign-in's refresh token redeemed for the calendar's
scope alone (connections/oauth/providers.py ``own_token``), kept as the grant's OAuthResourceToken. Adding the
calendar to a connected mailbox asks only for the calendar's scope and leaves the mailbox's token as it is.

Tokens live in an ``OAuthGrant`` (connections/oauth/tokens.py: encrypted, refreshed by one worker at a time, marked
"sign in again" when the refresh is refused); the ``MailAccount`` and ``CalendarAccount`` point at it. Signing in
again, or adding a capability (Google calendar after mail), replaces the grant's tokens in place.
"""

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from authlib.common.security import generate_token
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.urls import reverse

from accounts import audit
from accounts.models import AuditKind
from connections import calendars, crypto, mailboxes
from connections.checks import check_slot
from connections.models import CalendarAccount, GrantKind, MailAccount, OAuthGrant
from connections.network import ServiceError
from connections.oauth import graph_calendar, tokens
from connections.oauth.http import OAuthHttpError, check_endpoint, exchange
from connections.oauth.providers import (
    CALENDAR,
    GRAPH_CALENDAR_SCOPES,
    MAIL,
    Provider,
    address_of,
    describe,
    id_token_claims,
    provider,
)
from ops.public_url import base_url

logger = logging.getLogger(__name__)

SESSION_KEY = "oauth_mail_sign_ins"
SIGN_IN_SECONDS = 600  # from the click to the callback
MAX_PENDING = 5  # sign-ins one session may have started and not finished
MAX_CODE_LENGTH = 2000
TOKEN_AUTH_METHOD = "client_secret_post"  # both providers take it


class SignInRefused(Exception):
    """The sign-in cannot go on or could not be finished; the text says why, for the person. Nothing was stored."""


def callback_url(kind: str) -> str:
    """The redirect URI the operator registers with the provider (docs/howto/connect-google-microsoft.md)."""
    return base_url() + reverse("connections:oauth-mail-callback", args=[kind])


def _provider(kind: str) -> Provider:
    found = provider(kind)
    if found is None:
        raise SignInRefused("This server has no OAuth app for that provider; the operator has not set one up.")
    return found


def grant_of(owner: User | int, kind: str) -> OAuthGrant | None:
    """The person's grant for that provider, when a mailbox or a calendar uses it."""
    owner_id = owner if isinstance(owner, int) else owner.pk
    for grant in OAuthGrant.objects.filter(owner_id=owner_id, kind=kind).order_by("-id"):
        if _accounts(grant) != (None, None):
            return grant
    return None


def _accounts(grant: OAuthGrant) -> tuple[MailAccount | None, CalendarAccount | None]:
    return (
        MailAccount.objects.filter(oauth_grant=grant).first(),
        CalendarAccount.objects.filter(oauth_grant=grant).first(),
    )


def address_of_grant(grant: OAuthGrant) -> str:
    mailbox, calendar = _accounts(grant)
    return mailbox.address if mailbox is not None else calendar.username if calendar is not None else ""


def capabilities_of(grant: OAuthGrant) -> list[str]:
    mailbox, calendar = _accounts(grant)
    return [name for name, account in ((MAIL, mailbox), (CALENDAR, calendar)) if account is not None]


# Starting ---------------------------------------------------------------------------------------------------------


def start(session: Any, owner: User, kind: str, capabilities: list[str]) -> str:
    """Where to send the person's browser to sign in, asking for ``capabilities`` (mail, calendar); the sign-in is
    remembered in their session until its callback."""
    found = _provider(kind)
    wanted = [c for c in found.capabilities if c in capabilities]
    if not wanted:
        offered = describe(found.capabilities)
        raise SignInRefused(f"Choose what to connect: {found.name} offers {offered} here.")
    grant = grant_of(owner, kind)
    _refuse_password_accounts(owner, grant, wanted)
    try:
        authorization_url = check_endpoint(found.authorization_url, "authorization endpoint")
    except OAuthHttpError as refused:
        raise SignInRefused(str(refused)) from None
    verifier = generate_token(64)
    state = generate_token(40)
    extra = dict(found.authorize_parameters)
    if grant is not None and (address := address_of_grant(grant)):
        extra["login_hint"] = address  # the account already connected, not another one the browser knows
    url = prepare_grant_uri(
        authorization_url,
        client_id=found.client_id,
        response_type="code",
        redirect_uri=callback_url(kind),
        scope=found.scope_for(wanted),
        state=state,
        code_challenge=create_s256_code_challenge(verifier),
        code_challenge_method="S256",
        **extra,
    )
    pending = _pending(session)
    pending[state] = {
        "owner": owner.pk,
        "kind": kind,
        "verifier": verifier,
        "capabilities": wanted,
        "started": time.time(),
    }
    while len(pending) > MAX_PENDING:  # the oldest goes
        pending.pop(min(pending, key=lambda key: pending[key]["started"]))
    session[SESSION_KEY] = pending
    return str(url)


def _pending(session: Any) -> dict[str, dict[str, Any]]:
    found = session.get(SESSION_KEY)
    if not isinstance(found, dict):
        return {}
    now = time.time()
    return {
        state: flow
        for state, flow in found.items()
        if isinstance(flow, dict) and now - float(flow.get("started", 0)) < SIGN_IN_SECONDS
    }


def _refuse_password_accounts(owner: User, grant: OAuthGrant | None, wanted: list[str]) -> None:
    """One mailbox and one calendar per person: one connected with a password (or another provider) is removed
    first."""
    mailbox = MailAccount.objects.filter(owner=owner).first()
    if MAIL in wanted and mailbox is not None and (grant is None or mailbox.oauth_grant_id != grant.pk):
        raise SignInRefused("You already have a mailbox connected; remove it first.")
    calendar = CalendarAccount.objects.filter(owner=owner).first()
    if CALENDAR in wanted and calendar is not None and (grant is None or calendar.oauth_grant_id != grant.pk):
        raise SignInRefused("You already have a calendar connected; remove it first.")


# Finishing --------------------------------------------------------------------------------------------------------


@dataclass
class Connected:
    provider: str  # its name: Google
    address: str
    added: list[str] = field(default_factory=list)  # capabilities connected by this sign-in
    renewed: bool = False  # an existing connection's sign-in was renewed
    declined: list[str] = field(default_factory=list)  # asked for, but left unticked on the consent page


def finish(session: Any, owner: User, kind: str, query: dict[str, str]) -> Connected:
    """The callback: the person came back from the provider with a code (or an error). SignInRefused with the reason
    when nothing was connected."""
    pending = _pending(session)
    state = query.get("state")
    flow = pending.pop(state, None) if isinstance(state, str) else None
    session[SESSION_KEY] = pending  # used once, whatever happens next
    if flow is None or flow.get("owner") != owner.pk or flow.get("kind") != kind:
        raise SignInRefused(
            "This sign-in was not started from this browser, took too long, or was already used; nothing was "
            "connected. Start again from Connections."
        )
    found = _provider(kind)
    if query.get("error"):
        if query["error"] == "access_denied":
            raise SignInRefused(f"You declined at {found.name}; nothing was connected.")
        raise SignInRefused(f"{found.name} refused the sign-in ({_clean(query['error'], 60)}); nothing was connected.")
    code = query.get("code")
    if not isinstance(code, str) or not code or len(code) > MAX_CODE_LENGTH or not code.isprintable():
        raise SignInRefused(f"{found.name} sent you back without a sign-in code; nothing was connected.")
    issued, claims = _exchange_code(found, kind, code, str(flow["verifier"]), list(flow.get("capabilities") or []))
    try:
        return _connect(owner, found, issued, claims, list(flow.get("capabilities") or []))
    except SignInRefused:
        _discard(found, issued)
        raise


def _exchange_code(
    found: Provider, kind: str, code: str, verifier: str, asked: list[str]
) -> tuple[tokens.Tokens, dict[str, Any]]:
    extra = {}
    if found.own_token:  # one resource per token (Microsoft): the mailbox's when mail is asked, else the calendar's
        main = [c for c in asked if c not in found.own_token]
        extra["scope"] = found.main_scope(main) if main else found.scope_for(asked)
    body = prepare_token_request(
        "authorization_code", code=code, redirect_uri=callback_url(kind), code_verifier=verifier, **extra
    )
    auth = ClientAuth(found.client_id, found.client_secret, TOKEN_AUTH_METHOD)
    try:
        _uri, headers, encoded = auth.prepare("POST", found.token_url, {}, body)
        answer = exchange("POST", found.token_url, "token endpoint", form=encoded, headers=dict(headers))
        issued = tokens.parse_tokens(answer)
    except OAuthHttpError as failed:
        raise SignInRefused(f"Signing in with {found.name} failed: {failed} Nothing was connected.") from None
    try:
        claims = id_token_claims((answer.json_object() or {}).get("id_token"), found)
    except ValueError as bad:
        _discard(found, issued)
        raise SignInRefused(f"{found.name} did not say which account you signed in to ({bad}).") from None
    return issued, claims


def _connect(
    owner: User, found: Provider, issued: tokens.Tokens, claims: dict[str, Any], asked: list[str]
) -> Connected:
    grant = grant_of(owner, found.kind)
    address = _signed_in_address(found, claims, grant)
    own, issued = _own_tokens(found, issued, asked)
    granted = _granted(found, issued, asked, own)
    _refuse_password_accounts(owner, grant, granted)
    have = capabilities_of(grant) if grant is not None else []
    new = [c for c in granted if c not in have]
    checked = _check(owner, found, address, issued.access_token, new, own)
    main = [c for c in asked if c not in found.own_token]
    if found.own_token:  # the grant's own token is for the mailbox's resource alone (its refresh asks only that)
        issued = dataclasses.replace(issued, scope=found.main_scope(granted) if main else issued.scope)
    try:
        with transaction.atomic():
            grant = _store_tokens(owner, found, grant, issued, granted, renew_only=bool(not main and found.own_token))
            _store_accounts(owner, found, address, grant, checked, own)
    except IntegrityError:
        raise SignInRefused("A mailbox or calendar was connected meanwhile; nothing was changed.") from None
    logger.info("%s sign-in for user %s: %s", found.name, owner.pk, ", ".join(new) or "renewed")
    declined = [c for c in asked if c not in granted]
    return Connected(provider=found.name, address=address, added=new, renewed=bool(have), declined=declined)


def _granted(found: Provider, issued: tokens.Tokens, asked: list[str], own: dict[str, tokens.Tokens]) -> list[str]:
    """The capabilities the person allowed, in the provider's order: by the sign-in's scope, or by a token of their
    own."""
    by_scope = [c for c in found.granted(issued.scope or found.scope_for(asked)) if c not in found.own_token]
    granted = [c for c in found.capabilities if c in by_scope or c in own]
    if not granted:
        raise SignInRefused(f"You did not allow access to {describe(asked)}; nothing was connected.")
    return granted


def _store_accounts(
    owner: User,
    found: Provider,
    address: str,
    grant: OAuthGrant,
    checked: dict[str, Any],
    own: dict[str, tokens.Tokens],
) -> None:
    """The accounts of the new capabilities (``checked``: by _check) and the tokens of their own."""
    if MAIL in checked:
        _store_mailbox(owner, found, address, grant, checked[MAIL])
    if CALENDAR in checked:
        _store_calendar(owner, found, address, grant, checked[CALENDAR])
    for capability, issued_for in own.items():
        tokens.store_resource_token(grant, found.token_scope(capability), issued_for)


def _signed_in_address(found: Provider, claims: dict[str, Any], grant: OAuthGrant | None) -> str:
    """The address of the account signed in to, which must be the one already connected, if any."""
    address = address_of(claims)
    if not address:
        raise SignInRefused(f"{found.name} did not give the address of the account you signed in to.")
    existing = address_of_grant(grant) if grant is not None else None
    if existing and existing.lower() != address.lower():
        raise SignInRefused(
            f"You signed in as {address}, but the {found.name} account connected here is {existing}: sign in "
            "as that account, or remove it first."
        )
    return address


def _store_tokens(
    owner: User, found: Provider, grant: OAuthGrant | None, issued: tokens.Tokens, granted: list[str], renew_only: bool
) -> OAuthGrant:
    """The sign-in's grant, new or with its tokens replaced; ``renew_only`` keeps the mailbox's access token (a
    sign-in that asked only for capabilities with tokens of their own)."""
    if grant is None:
        return tokens.store_grant(
            owner.pk,
            found.kind,
            client=tokens.Client(found.client_id, found.client_secret, TOKEN_AUTH_METHOD),
            token_endpoint=found.token_url,
            tokens=issued,
            issuer=found.issuer,
            revocation_endpoint=found.revocation_url,
            scope=found.scope_for(granted),
        )
    if renew_only:
        tokens.replace_refresh_token(grant, issued.refresh_token)
    else:
        tokens.replace_tokens(grant, issued)
    return grant


def _own_tokens(
    found: Provider, issued: tokens.Tokens, asked: list[str]
) -> tuple[dict[str, tokens.Tokens], tokens.Tokens]:
    """The access tokens of the asked capabilities that need one of their own (Microsoft's calendar on Graph): the
    sign-in's refresh token redeemed for each one's scope. A capability the provider will not issue a token for was
    not consented to, and is left out. With the sign-in's tokens, whose refresh token is the last one issued (a
    provider that rotates them has spent the earlier one)."""
    own: dict[str, tokens.Tokens] = {}
    client = tokens.Client(found.client_id, found.client_secret, TOKEN_AUTH_METHOD)
    for capability in [c for c in asked if c in found.own_token]:
        if not issued.refresh_token:
            raise SignInRefused(f"{found.name} gave no refresh token; nothing was connected.")
        try:
            redeemed = tokens.redeem(found.token_url, client, issued.refresh_token, found.token_scope(capability))
        except tokens.GrantRefused:
            continue  # not consented to: said as declined
        except OAuthHttpError as failed:
            raise SignInRefused(f"Signed in, but {failed} Nothing was connected.") from None
        own[capability] = redeemed
        if redeemed.refresh_token:
            issued = dataclasses.replace(issued, refresh_token=redeemed.refresh_token)
    return own, issued


def _check(
    owner: User, found: Provider, address: str, token: str, new: list[str], own: dict[str, tokens.Tokens]
) -> dict[str, Any]:
    """Log in to the servers of each new capability with the token before anything is stored."""
    seconds = float(settings.MCP_CHECK_TIMEOUT_SECONDS)
    checked: dict[str, Any] = {}
    try:
        with check_slot(owner.pk):
            if MAIL in new:
                checked[MAIL] = mailboxes.check(_mail_server(found, address, token), seconds)
            if CALENDAR in new and CALENDAR in own:
                graph = calendars.CalendarServer(
                    url=found.graph_url, username=address, password="", bearer=own[CALENDAR].access_token
                )
                checked[CALENDAR] = graph_calendar.check(graph, seconds)
            elif CALENDAR in new:
                checked[CALENDAR] = calendars.check(_calendar_server(found, address, token), seconds)
    except ServiceError as failed:
        raise SignInRefused(f"Signed in, but {failed} Nothing was connected.") from None
    return checked


def _hosts(found: Provider) -> dict[str, Any]:
    """The provider's IMAP and SMTP servers, as a MailServer and a MailAccount name them."""
    imap, smtp = found.imap, found.smtp
    return {
        "imap_host": imap.host, "imap_port": imap.port, "imap_security": imap.security,
        "smtp_host": smtp.host, "smtp_port": smtp.port, "smtp_security": smtp.security,
    }  # fmt: skip


def _mail_server(found: Provider, address: str, token: str) -> mailboxes.MailServer:
    return mailboxes.MailServer(address=address, username=address, password="", oauth_token=token, **_hosts(found))


def _calendar_server(found: Provider, address: str, token: str) -> calendars.CalendarServer:
    return calendars.CalendarServer(
        url=found.caldav_url, username=address, password="", calendar_url=found.calendar_url(address), bearer=token
    )


def _store_mailbox(owner: User, found: Provider, address: str, grant: OAuthGrant, drafts: str) -> None:
    MailAccount.objects.create(
        owner=owner,
        address=address,
        username=address,
        password_encrypted="",
        drafts_folder=str(drafts)[:255],
        oauth_grant=grant,
        **_hosts(found),
    )
    audit.record(owner, AuditKind.CONNECTION_ADDED, f"{found.name} mailbox {address}", by=audit.CONSOLE)


def _store_calendar(owner: User, found: Provider, address: str, grant: OAuthGrant, checked: tuple[str, str]) -> None:
    calendar_url, name = checked
    CalendarAccount.objects.create(
        owner=owner,
        server_url=found.graph_url or found.caldav_url,
        username=address,
        password_encrypted="",
        calendar_url=calendar_url[:2000],
        calendar_name=name[:100],
        oauth_grant=grant,
    )
    audit.record(owner, AuditKind.CONNECTION_ADDED, f"{found.name} calendar of {address}", by=audit.CONSOLE)


def _discard(found: Provider, issued: tokens.Tokens) -> None:
    """Tokens we will not keep are revoked where the provider can (best effort): a refused sign-in leaves nothing
    behind, here or usable there."""
    if not found.revocation_url:
        return
    tokens.revoke_unstored(
        issued,
        kind=found.kind,
        token_endpoint=found.token_url,
        revocation_endpoint=found.revocation_url,
        client_id=found.client_id,
        client_secret_encrypted=crypto.encrypt(found.client_secret),
        token_auth_method=TOKEN_AUTH_METHOD,
    )


def _clean(text: str, limit: int) -> str:
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat[:limit]


# Using -------------------------------------------------------------------------------------------------------------


class SignInNeeded(Exception):
    """The grant can no longer be used: the person must sign in again from the console (the text says so)."""


def _sign_in_again_text(kind: str) -> str:
    name = "Microsoft" if kind == GrantKind.MICROSOFT else "Google"
    return (
        f"The {name} sign-in for this account has expired or was withdrawn: the person must open Connections in "
        f"the console and choose “Sign in again” for {name}. Nothing was done."
    )


def with_token[T](grant_id: int, kind: str, use: Callable[[str], T], scope: str = "") -> T:
    """Run ``use`` with a fresh access token of the grant (with ``scope``: its token for another resource's
    scopes); when the server refuses it (ServiceError with ``authentication``), refresh once and run it once more.
    SignInNeeded when the grant cannot be refreshed; ServiceError for anything else. Safe on a delivery attempt's
    thread (the database steps go through ops.database_work)."""
    try:
        token = tokens.access_token(grant_id, scope=scope)
        try:
            return use(token)
        except ServiceError as refused:
            if not refused.authentication:
                raise
            return use(tokens.access_token(grant_id, rejected=token, scope=scope))
    except tokens.SignInAgain:
        raise SignInNeeded(_sign_in_again_text(kind)) from None
    except tokens.TokenUnavailable as unavailable:
        raise ServiceError(f"The sign-in could not be renewed just now ({unavailable}); try again shortly.") from None


def mail_server(account: MailAccount, token: str) -> mailboxes.MailServer:
    return mailboxes.MailServer(
        address=account.address,
        username=account.username,
        password="",
        oauth_token=token,
        **mailboxes.hosts_of(account),
    )


def uses_graph(account: CalendarAccount) -> bool:
    """Whether the calendar is a Microsoft one, reached through Microsoft Graph (oauth/graph_calendar.py)."""
    grant = account.oauth_grant
    return grant is not None and grant.kind == GrantKind.MICROSOFT


def calendar_scope(account: CalendarAccount) -> str:
    """The scopes of the calendar's own access token ("": the grant's own token serves it, as Google's does)."""
    return " ".join(GRAPH_CALENDAR_SCOPES) if uses_graph(account) else ""


def calendar_server(account: CalendarAccount, token: str) -> calendars.CalendarServer:
    return calendars.CalendarServer(
        url=account.server_url,
        username=account.username,
        password="",
        calendar_url=account.calendar_url,
        bearer=token,
    )


# Removing ---------------------------------------------------------------------------------------------------------


def disconnect(grant: OAuthGrant, *, by: str = audit.CONSOLE) -> bool:
    """Remove the provider's mailbox and calendar and the grant; the tokens are revoked first where the provider
    offers revocation (Google). Whether they were revoked."""
    revoked = tokens.revoke(grant)
    address = address_of_grant(grant)
    with transaction.atomic():
        grant.delete()  # its mailbox and calendar go with it
        audit.record(
            grant.owner_id, AuditKind.CONNECTION_REMOVED, f"{grant.get_kind_display()} account {address}", by=by
        )
    logger.info("oauth grant %s removed (revoked: %s)", grant.pk, revoked)
    return revoked


def remove_account(account: MailAccount | CalendarAccount, *, by: str = audit.CONSOLE) -> bool:
    """Remove one OAuth mailbox or calendar; the grant goes too (and is revoked) when nothing else uses it. Whether
    tokens were revoked."""
    grant = account.oauth_grant
    assert grant is not None
    mailbox, calendar = _accounts(grant)
    if (calendar if isinstance(account, MailAccount) else mailbox) is None:  # nothing else uses the grant
        return disconnect(grant, by=by)
    kind = "mailbox" if isinstance(account, MailAccount) else "calendar"
    with transaction.atomic():
        account.delete()
        if isinstance(account, CalendarAccount):
            grant.resource_tokens.all().delete()  # the calendar's own token (Microsoft's for Graph) goes with it
        audit.record(account.owner_id, AuditKind.CONNECTION_REMOVED, f"{grant.get_kind_display()} {kind}", by=by)
    return False
