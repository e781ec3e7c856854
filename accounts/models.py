from django.conf import settings
from django.db import models

from accounts.validators import validate_e164, validate_time_zone


class Channel(models.TextChoices):
    SMS = "sms", "SMS"
    WHATSAPP = "whatsapp", "WhatsApp"
    IMESSAGE = "imessage", "iMessage"


class Profile(models.Model):
    """What the legacy endpoint reports back: where the user's assistant reaches them."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    phone_number = models.CharField(max_length=16, blank=True, validators=[validate_e164])
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.SMS)
    # An IANA name (Europe/Paris): reminders the assistant schedules are read and repeated in it.
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    def __str__(self) -> str:
        return f"Profile of {self.user}"


class AuditKind(models.TextChoices):
    KEY_CREATED = "key_created", "Key created"
    KEY_ROLLED = "key_rolled", "Key rolled"
    KEY_RENAMED = "key_renamed", "Key renamed"
    KEY_REVOKED = "key_revoked", "Key revoked"
    KEY_EXPIRED = "key_expired", "Key expired"
    KEY_SCOPES_CHANGED = "key_scopes_changed", "Key scopes changed"
    KEY_TOOLS_CHANGED = "key_tools_changed", "Key's tool policy changed"
    APPROVAL_GIVEN = "approval_given", "Action approved"
    APPROVAL_DENIED = "approval_denied", "Action denied"
    APPROVAL_EXPIRED = "approval_expired", "Approval expired"
    WEBHOOK_ADDED = "webhook_added", "Webhook added"
    WEBHOOK_REMOVED = "webhook_removed", "Webhook revoked"
    CONNECTION_ADDED = "connection_added", "Connection added"
    CONNECTION_REMOVED = "connection_removed", "Connection removed"
    # Whether a connection's read-only claims are believed, or one of its tools is treated as acting
    # (docs/explanation/approval.md).
    CONNECTION_TRUST_CHANGED = "connection_trust_changed", "Connection's tools: read-only trust changed"


class AuditEvent(models.Model):
    """Something that changed what can act on a person's behalf (accounts/audit.py records it): shown to them under
    Settings → Audit log and to staff in the admin. Written once, never edited."""

    account = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="audit_events")
    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=32, choices=AuditKind.choices)
    summary = models.CharField(max_length=500)  # what, in a sentence: names and hints, never a secret
    actor = models.CharField(max_length=200)  # who or what did it: "you, in the console", "API key “ci” (psk_…ab12)"
    # Set for events that must be recorded once only (a key's expiry, noticed by whichever comes first).
    once = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["account", "-at"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.summary}"
