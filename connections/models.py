"""A person's MCP servers: where each one is, its API key (encrypted), and the tools it offered at the last sync."""

import re
import secrets
import string

from django.conf import settings
from django.db import models
from django.utils import timezone

_ALPHABET = string.digits + string.ascii_letters
CONNECTION_ID_PREFIX = "mcp_"
_CONNECTION_ID = re.compile(r"mcp_[0-9A-Za-z]{20}")


def new_connection_id() -> str:
    """The connection's public id (what the CLI puts in its URLs): random, so ids reveal no counts."""
    return CONNECTION_ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(20))


def is_connection_id(value: str) -> bool:
    return _CONNECTION_ID.fullmatch(value) is not None


class GrantKind(models.TextChoices):
    MCP = "mcp", "MCP server"
    GOOGLE = "google", "Google"
    MICROSOFT = "microsoft", "Microsoft"


class GrantStatus(models.TextChoices):
    ACTIVE = "active", "Signed in"
    SIGN_IN_AGAIN = "sign_in_again", "Sign in again"


class OAuthGrant(models.Model):
    """What a person's OAuth sign-in gave us: tokens (encrypted like the servers' API keys, connections/crypto.py)
    and what refreshing and revoking them needs (the token and revocation endpoints, the client).

    Shared by every kind of OAuth connection (an MCP server, a Google or Microsoft mailbox and calendar): the
    connection points at its grant. The tokens are read, refreshed and revoked only through
    connections/oauth/tokens.py, which serialises refreshes with ``version`` and the refresh lease."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_grants")
    kind = models.CharField(max_length=20, choices=GrantKind.choices)
    issuer = models.CharField(max_length=2000, blank=True, help_text="The authorization server's issuer.")
    token_endpoint = models.CharField(max_length=2000)
    revocation_endpoint = models.CharField(max_length=2000, blank=True, help_text="RFC 7009; empty: none offered.")
    client_id = models.CharField(max_length=2000)
    client_secret_encrypted = models.TextField(blank=True, editable=False)
    # How the client authenticates at the token endpoint: none (PKCE only), client_secret_post or _basic.
    token_auth_method = models.CharField(max_length=40, default="none")
    resource = models.CharField(max_length=2000, blank=True, help_text="The RFC 8707 resource the tokens are for.")
    scope = models.TextField(blank=True)
    # What a server asked for beyond this sign-in (a 403 insufficient_scope, connections/client.py ScopeRequired):
    # the next sign-in asks for it too. Emptied by that sign-in.
    scope_wanted = models.TextField(blank=True)
    access_token_encrypted = models.TextField(editable=False)
    refresh_token_encrypted = models.TextField(blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When the access token expires, if said.")
    status = models.CharField(max_length=20, choices=GrantStatus.choices, default=GrantStatus.ACTIVE)
    status_detail = models.TextField(blank=True, help_text="Why the person must sign in again.")
    # Bumped each time the tokens change: a refresher stores its result only over the version it read.
    version = models.PositiveIntegerField(default=0, editable=False)
    # One refresher at a time: who holds the right to spend the refresh token, and until when.
    refresh_lease = models.CharField(max_length=64, blank=True, editable=False)
    refresh_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.get_kind_display()} sign-in at {self.issuer or self.token_endpoint}"

    @property
    def needs_sign_in(self) -> bool:
        return self.status == GrantStatus.SIGN_IN_AGAIN


class OAuthResourceToken(models.Model):
    """An access token of a grant for another resource than the grant's own (Microsoft's calendar on Graph, whose
    audience differs from the mailbox's): the grant's refresh token redeemed for ``scope`` alone. The refresh token,
    its lease and its version stay the grant's (connections/oauth/tokens.py); only the access token lives here."""

    grant = models.ForeignKey(OAuthGrant, on_delete=models.CASCADE, related_name="resource_tokens")
    scope = models.CharField(max_length=500)
    access_token_encrypted = models.TextField(editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["grant", "scope"], name="connections_resource_token_unique_scope")
        ]

    def __str__(self) -> str:
        return f"token for {self.scope}"


class OAuthSignIn(models.Model):
    """A sign-in under way: made when the person is sent to the authorization server, used once when they come back
    (connections/oauth/mcp.py). Only the digest of its ``state`` is stored; the state itself is in the redirect and
    its digest in the person's session, so a callback counts only in the browser session that started it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_sign_ins")
    state_digest = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=20, choices=GrantKind.choices)
    # What the sign-in is for: a new MCP connection (name and URL), or an existing one signing in again.
    connection = models.ForeignKey("Connection", null=True, blank=True, on_delete=models.CASCADE)
    name = models.CharField(max_length=100, blank=True)
    server_url = models.CharField(max_length=2000, blank=True)
    redirect_uri = models.CharField(max_length=2000)
    code_verifier_encrypted = models.TextField(editable=False)  # PKCE (RFC 7636)
    issuer = models.CharField(max_length=2000, blank=True)
    issuer_in_response = models.BooleanField(default=False, help_text="RFC 9207: the callback must carry iss.")
    token_endpoint = models.CharField(max_length=2000)
    revocation_endpoint = models.CharField(max_length=2000, blank=True)
    client_id = models.CharField(max_length=2000)
    client_secret_encrypted = models.TextField(blank=True, editable=False)
    token_auth_method = models.CharField(max_length=40, default="none")
    resource = models.CharField(max_length=2000, blank=True)
    scope = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"sign-in to {self.server_url or self.issuer}"


class Connection(models.Model):
    public_id = models.CharField(max_length=32, unique=True, default=new_connection_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_connections")
    name = models.CharField(max_length=100)
    server_url = models.CharField(max_length=2000)
    # Fernet token of the server's API key (connections/crypto.py); empty when the server needs none.
    # Never shown again: the console and the admin only say whether one is set.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    server_name = models.CharField(max_length=200, blank=True, help_text="What the server calls itself.")
    server_version = models.CharField(max_length=100, blank=True)
    active = models.BooleanField(default=True, help_text="The assistant offers the tools of active connections only.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_synced_at = models.DateTimeField(null=True, blank=True, help_text="When the tools were last read.")
    last_error = models.TextField(blank=True, help_text="Why the last sync or tool call failed, if it did.")
    # The OAuth sign-in the server's tokens come from (connections/oauth/); null for a server with a key or none.
    oauth_grant = models.OneToOneField(
        OAuthGrant, null=True, blank=True, on_delete=models.SET_NULL, related_name="mcp_connection"
    )
    # Read-only is the person's call, not the server's (assistant/approval/rule.py): a tool's readOnlyHint is
    # believed for an API key's or a trigger's message only when the person marked the server trusted; and a tool they
    # marked as acting (by name: the marks outlive a sync) is treated as acting whatever the server says.
    trusted = models.BooleanField(
        default=False, help_text="The person believes the server's read-only claims for automations' messages."
    )
    acting_tools = models.JSONField(
        default=list, blank=True, help_text="Names of tools the person marked as acting, whatever the server says."
    )

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.server_url})"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class Tool(models.Model):
    """A tool as the server listed it (tools/list): its name, description and JSON schema for the arguments."""

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=255)
    title = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    # The server's readOnlyHint, read at each sync: unknown (absent) is stored as False, a tool that acts.
    read_only = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["connection", "name"], name="connections_tool_unique_name")]

    def __str__(self) -> str:
        return self.name


CALENDAR_ID_PREFIX = "cal_"
MAILBOX_ID_PREFIX = "mbx_"
_ACCOUNT_ID = re.compile(r"(cal|mbx)_[0-9A-Za-z]{20}")


def new_calendar_id() -> str:
    return CALENDAR_ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(20))


def new_mailbox_id() -> str:
    return MAILBOX_ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(20))


def is_account_id(value: str, prefix: str) -> bool:
    return value.startswith(prefix) and _ACCOUNT_ID.fullmatch(value) is not None


class Security(models.TextChoices):
    SSL = "ssl", "TLS (SSL)"
    STARTTLS = "starttls", "STARTTLS"
    NONE = "none", "None (unencrypted)"


class CalendarAccount(models.Model):
    """A person's CalDAV calendar (one per person): the server, the log-in, and the calendar found when added."""

    public_id = models.CharField(max_length=32, unique=True, default=new_calendar_id, editable=False)
    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_account")
    server_url = models.CharField(max_length=2000)
    username = models.CharField(max_length=255)
    # Fernet token of the app password (connections/crypto.py, rotated by `rotatemcpkeys`); never shown again.
    password_encrypted = models.TextField(editable=False)
    calendar_url = models.CharField(max_length=2000, help_text="The calendar the assistant reads and writes.")
    calendar_name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # Google's calendar, signed in to with OAuth (connections/oauth/mail.py): the grant's access token is the bearer
    # token, and password_encrypted is empty. Removing the grant removes the calendar.
    oauth_grant = models.OneToOneField(
        OAuthGrant, null=True, blank=True, on_delete=models.CASCADE, related_name="calendar", editable=False
    )

    def __str__(self) -> str:
        return f"{self.username} at {self.server_url}"


class MailAccount(models.Model):
    """A person's mailbox (one per person): IMAP to read and keep drafts, SMTP to send, one log-in for both."""

    public_id = models.CharField(max_length=32, unique=True, default=new_mailbox_id, editable=False)
    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mail_account")
    address = models.CharField(max_length=254, help_text="The person's address: the From of drafts and mail sent.")
    username = models.CharField(max_length=255)
    password_encrypted = models.TextField(editable=False)  # as CalendarAccount's
    imap_host = models.CharField(max_length=253)
    imap_port = models.PositiveIntegerField()
    imap_security = models.CharField(max_length=10, choices=Security.choices)
    smtp_host = models.CharField(max_length=253)
    smtp_port = models.PositiveIntegerField()
    smtp_security = models.CharField(max_length=10, choices=Security.choices)
    drafts_folder = models.CharField(max_length=255, default="Drafts")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # A Google or Microsoft mailbox signed in to with OAuth: IMAP and SMTP log in with XOAUTH2 and the grant's access
    # token; password_encrypted is empty. Removing the grant removes the mailbox.
    oauth_grant = models.OneToOneField(
        OAuthGrant, null=True, blank=True, on_delete=models.CASCADE, related_name="mailbox", editable=False
    )

    def __str__(self) -> str:
        return self.address
