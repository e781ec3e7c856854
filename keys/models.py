from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from keys.scopes import Scope, loaded


class Generation(models.TextChoices):
    V1 = "v1", "V1 (legacy, pk_)"
    V2 = "v2", "V2"


class ToolAccess(models.TextChoices):
    """What the assistant may do for a message that came through the key (assistant/tools/toolbox.py)."""

    ALL = "all", "Every tool"
    READ_ONLY = "read_only", "Read-only tools only (nothing that changes anything)"
    NONE = "none", "No tools: the assistant only answers"
    LISTED = "listed", "Only the tools listed"


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> "ApiKeyQuerySet":
        """Neither revoked nor expired: the keys that count towards the account's cap."""
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiKey(models.Model):
    """A named key. Only the SHA-256 digest of the secret is kept; the plaintext is shown once at creation."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    generation = models.CharField(max_length=2, choices=Generation.choices, default=Generation.V2)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # After this time the key is refused (401 expired_api_key); null: it does not expire.
    expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the key may do: scope names separated by spaces (keys/scopes.py). The assistant's reply goes to the
    # person in their thread, not to the caller (spec): a receipt carries it only with replies:read.
    scopes = models.CharField(max_length=200, default="", blank=True, editable=False)
    # Set for the keys that existed before scopes did: they were given what they could do then, which the console
    # says, until the owner chooses their scopes.
    scopes_predate_choice = models.BooleanField(default=False, editable=False)
    tool_access = models.CharField(max_length=16, choices=ToolAccess.choices, default=ToolAccess.ALL)
    allowed_tools = models.JSONField(default=list, blank=True)  # tool names, for ToolAccess.LISTED
    # Whether a tool that changes something waits for the owner's approval when the assistant wants it for one of
    # this key's messages (assistant/approval/requests.py). What the person types themselves never waits.
    tools_need_approval = models.BooleanField(default=True)
    # A test key (docs/howto/keys-and-scopes.md#test-keys): same format as any key; its messages are answered apart
    # from the person's thread, with no tool, no text to their phone and no approval asked.
    test_mode = models.BooleanField(default=False, editable=False)
    # Set when the key was rolled: the key with the new secret. This one then works until its expires_at (the
    # overlap its owner chose).
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.hint})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Revocation is one-way: nothing may bring a revoked key back to life.
        was_revoked = self.pk and ApiKey.objects.filter(pk=self.pk, revoked_at__isnull=False).exists()
        if self.revoked_at is None and was_revoked:
            raise ValueError("A revoked API key cannot be reactivated; create a new key instead.")
        super().save(*args, **kwargs)

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def has_scope(self, scope: Scope) -> bool:
        return scope.value in self.scopes.split()

    @property
    def scope_set(self) -> frozenset[Scope]:
        return loaded(self.scopes)

    @property
    def may_read_replies(self) -> bool:
        return self.has_scope(Scope.REPLIES_READ)
