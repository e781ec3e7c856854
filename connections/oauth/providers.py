"""Google and Microsoft as mail and calendar providers signed in to with OAuth 2.0: the operator's OAuth app and
endpoints (settings), the scopes each capability needs, and the servers the tokens are used at.

Scopes are the narrowest that serve the tools (docs/howto/connect-google-microsoft.md):
- Google mail: ``https://mail.google.com/``, the only scope Gmail's IMAP and SMTP accept (reading, drafts and
  sending alike); Google calendar: ``https://www.googleapis.com/auth/calendar.events`` (events, through Google's
  CalDAV interface).
- Microsoft mail: ``IMAP.AccessAsUser.All`` to read and keep drafts, ``SMTP.Send`` to send (both on
  outlook.office.com); Microsoft calendar: ``Calendars.ReadWrite`` on graph.microsoft.com (Microsoft calendars have
  no CalDAV interface: events go through Microsoft Graph's REST API, connections/oauth/graph_calendar.py).
Both ask ``openid email`` to learn the address signed in to, and for a refresh token (Google: ``access_type=
offline``; Microsoft: the ``offline_access`` scope). A capability added later asks only for its own scopes (Google:
``include_granted_scopes=true``, so the new token carries the earlier ones too; Microsoft keeps what was consented
to before on its own).

One Microsoft access token is for one resource (its audience): outlook.office.com's does not open Graph, and the
token endpoint refuses to issue one for scopes of two resources at once. The grant's refresh token serves every
resource consented to, so a capability on another resource than the mailbox's (``own_token``) gets its access
token by redeeming the refresh token for that capability's scopes alone (connections/oauth/tokens.py, ``scope=``).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from connections.models import GrantKind

MAIL = "mail"
CALENDAR = "calendar"
CAPABILITIES = (MAIL, CALENDAR)
# The narrowest Graph scope that lists, creates and deletes events of the person's own calendars.
GRAPH_CALENDAR_SCOPES = ("https://graph.microsoft.com/Calendars.ReadWrite",)


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    security: str  # ssl, starttls or none


@dataclass(frozen=True)
class Provider:
    kind: str  # GrantKind: google, microsoft
    name: str  # as the person reads it
    client_id: str
    client_secret: str = field(repr=False)
    authorization_url: str
    token_url: str
    revocation_url: str  # "" when the provider offers no RFC 7009 endpoint (Microsoft)
    issuer: str  # the ID token's expected "iss"; "" when it varies by tenant (Microsoft)
    imap: Server
    smtp: Server
    caldav_url: str  # "" when the provider has no CalDAV interface (Microsoft)
    graph_url: str  # Microsoft Graph's REST API, where the calendar is when there is no CalDAV; "" otherwise
    scopes: dict[str, tuple[str, ...]]  # capability -> scopes
    base_scopes: tuple[str, ...]  # asked every time: the address signed in to, and offline access
    authorize_parameters: dict[str, str]  # added to every authorization request
    # Capabilities whose tokens are for another resource than the sign-in's (Microsoft's calendar, on Graph): their
    # access token is the refresh token redeemed for their scopes alone (``token_scope``).
    own_token: frozenset[str] = frozenset()

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(capability for capability in CAPABILITIES if capability in self.scopes)

    def scope_for(self, capabilities: list[str] | tuple[str, ...]) -> str:
        wanted = list(self.base_scopes)
        for capability in capabilities:
            wanted += [scope for scope in self.scopes.get(capability, ()) if scope not in wanted]
        return " ".join(wanted)

    def granted(self, scope: str) -> list[str]:
        """The capabilities a granted scope string covers in full. Compared without case, and a provider that
        answers a scope's short name (Microsoft may say "IMAP.AccessAsUser.All" for
        "https://outlook.office.com/IMAP.AccessAsUser.All") counts as granting it."""
        have = {item.lower() for item in scope.split()}

        def covered(wanted: str) -> bool:
            short = wanted.rstrip("/").rsplit("/", 1)[-1].lower()
            return wanted.lower() in have or (
                wanted.startswith("https://") and not wanted.endswith("/") and short in have
            )

        return [c for c in self.capabilities if all(covered(wanted) for wanted in self.scopes[c])]

    def main_scope(self, capabilities: list[str] | tuple[str, ...]) -> str:
        """The scopes of the grant's own token: those of the capabilities that have no token of their own."""
        return self.scope_for([c for c in capabilities if c not in self.own_token])

    def token_scope(self, capability: str) -> str:
        """What a capability's own access token is asked for (``own_token``): its scopes alone, one resource's."""
        return " ".join(self.scopes[capability])

    def calendar_url(self, address: str) -> str:
        """The person's primary calendar on the provider's CalDAV interface (Google names it by the address)."""
        from urllib.parse import quote

        return f"{self.caldav_url.rstrip('/')}/{quote(address, safe='@')}/events/" if self.caldav_url else ""


def _server(value: str, label: str) -> Server:
    parts = value.rsplit(":", 2)
    try:
        if len(parts) < 2 or (len(parts) == 3 and parts[2] not in ("ssl", "starttls", "none")):
            raise ValueError(value)
        return Server(host=parts[0], port=int(parts[1]), security=parts[2] if len(parts) == 3 else "ssl")
    except ValueError:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{label} must be host:port:security, e.g. imap.gmail.com:993:ssl.") from None


def google() -> Provider | None:
    if not settings.GOOGLE_OAUTH_CLIENT_ID:
        return None
    return Provider(
        kind=GrantKind.GOOGLE,
        name="Google",
        client_id=settings.GOOGLE_OAUTH_CLIENT_ID,
        client_secret=settings.GOOGLE_OAUTH_CLIENT_SECRET,
        authorization_url=settings.GOOGLE_OAUTH_AUTHORIZATION_URL,
        token_url=settings.GOOGLE_OAUTH_TOKEN_URL,
        revocation_url=settings.GOOGLE_OAUTH_REVOCATION_URL,
        issuer=settings.GOOGLE_OAUTH_ISSUER,
        imap=_server(settings.GOOGLE_IMAP, "GOOGLE_IMAP"),
        smtp=_server(settings.GOOGLE_SMTP, "GOOGLE_SMTP"),
        caldav_url=settings.GOOGLE_CALDAV_URL,
        graph_url="",
        scopes={
            MAIL: ("https://mail.google.com/",),
            CALENDAR: ("https://www.googleapis.com/auth/calendar.events",),
        },
        base_scopes=("openid", "email"),
        # offline: a refresh token; consent: Google gives the refresh token again on a second sign-in; granted
        # scopes: incremental consent keeps what was granted before.
        authorize_parameters={"access_type": "offline", "prompt": "consent", "include_granted_scopes": "true"},
    )


def microsoft() -> Provider | None:
    if not settings.MICROSOFT_OAUTH_CLIENT_ID:
        return None
    tenant = settings.MICROSOFT_OAUTH_TENANT or "common"
    return Provider(
        kind=GrantKind.MICROSOFT,
        name="Microsoft",
        client_id=settings.MICROSOFT_OAUTH_CLIENT_ID,
        client_secret=settings.MICROSOFT_OAUTH_CLIENT_SECRET,
        authorization_url=settings.MICROSOFT_OAUTH_AUTHORIZATION_URL.replace("{tenant}", tenant),
        token_url=settings.MICROSOFT_OAUTH_TOKEN_URL.replace("{tenant}", tenant),
        revocation_url=settings.MICROSOFT_OAUTH_REVOCATION_URL,
        issuer="",
        imap=_server(settings.MICROSOFT_IMAP, "MICROSOFT_IMAP"),
        smtp=_server(settings.MICROSOFT_SMTP, "MICROSOFT_SMTP"),
        caldav_url="",
        graph_url=settings.MICROSOFT_GRAPH_URL.rstrip("/"),
        scopes={
            MAIL: ("https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send"),
            CALENDAR: GRAPH_CALENDAR_SCOPES,
        },
        base_scopes=("openid", "email", "offline_access"),
        authorize_parameters={},
        own_token=frozenset({CALENDAR}),
    )


def provider(kind: str) -> Provider | None:
    """The provider of that kind when the operator configured its OAuth app; None otherwise."""
    kinds: dict[str, Callable[[], Provider | None]] = {GrantKind.GOOGLE: google, GrantKind.MICROSOFT: microsoft}
    found = kinds.get(kind)
    return found() if found is not None else None


def configured() -> list[Provider]:
    return [found for found in (google(), microsoft()) if found is not None]


def describe(capabilities: list[str] | tuple[str, ...]) -> str:
    names = {MAIL: "mail", CALENDAR: "calendar"}
    return " and ".join(names[c] for c in capabilities if c in names) or "nothing"


def id_token_claims(id_token: Any, provider: Provider) -> dict[str, Any]:
    """The claims of the ID token the token endpoint answered, checked for audience, expiry and (Google) issuer.

    Its signature is not checked: it came straight from the provider's token endpoint over TLS, in answer to our
    own authenticated request, which OpenID Connect Core (section 3.1.3.7) accepts in place of the signature.
    ValueError when it is missing, malformed or not for us."""
    import jwt  # PyJWT

    if not isinstance(id_token, str) or not id_token or len(id_token) > 16_000:
        raise ValueError("no ID token")
    try:
        claims = jwt.decode(
            id_token,
            options={
                "verify_signature": False,
                "verify_aud": True,
                "verify_exp": True,
                "verify_iss": bool(provider.issuer),
            },
            audience=provider.client_id,
            issuer=provider.issuer or None,
            leeway=120,
        )
    except jwt.PyJWTError as error:
        raise ValueError(f"the ID token is not for this app ({type(error).__name__})") from None
    return dict(claims)


def address_of(claims: dict[str, Any]) -> str:
    """The mailbox address the person signed in to: "email", else Microsoft's "preferred_username" (a UPN, which is
    the address for Microsoft 365 accounts). "" when neither looks like an address."""
    for name in ("email", "preferred_username", "upn"):
        value = claims.get(name)
        if (
            isinstance(value, str)
            and 3 <= len(value) <= 254
            and value.count("@") == 1
            and value.isprintable()
            and not any(ch.isspace() for ch in value)
        ):
            return value
    return ""
