import secrets
import string

from django.conf import settings
from django.db import models
from django.utils import timezone

_ID_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
TRIGGER_ID_PREFIX = "trg_"
TRIGGER_ID_LENGTH = len(TRIGGER_ID_PREFIX) + 20

CONDITION_MAX_LENGTH = 500
ACTION_MAX_LENGTH = 2000


def new_trigger_id() -> str:
    """The public id (trg_ + 20 base62 characters): in the webhook's URL, so random, never a sequential number."""
    return TRIGGER_ID_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(TRIGGER_ID_LENGTH - 4))


class WebhookTriggerQuerySet(models.QuerySet["WebhookTrigger"]):
    def active(self) -> "WebhookTriggerQuerySet":
        return self.filter(revoked_at__isnull=True)


class WebhookTrigger(models.Model):
    """When something happens elsewhere (the condition), a sender POSTs to the trigger's URL with its token, and the
    action lands in the owner's thread as their instruction, the posted JSON as its context.

    Only the SHA-256 digest of the token is kept; the plaintext is shown once. A signing secret for senders that
    cannot set an Authorization header (GitHub) is derived from the server's SECRET_KEY and ``signing_salt``, never
    stored: empty salt, no signing."""

    public_id = models.CharField(max_length=TRIGGER_ID_LENGTH, default=new_trigger_id, editable=False, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_triggers")
    condition = models.CharField(max_length=CONDITION_MAX_LENGTH)
    action = models.TextField(max_length=ACTION_MAX_LENGTH)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=16, editable=False)
    signing_salt = models.CharField(max_length=64, blank=True, editable=False)
    # The key the trigger was created with through the API (none when created in the console).
    created_with = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_fired_at = models.DateTimeField(null=True, blank=True, editable=False)
    fire_count = models.PositiveIntegerField(default=0, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = WebhookTriggerQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "webhook trigger"

    def __str__(self) -> str:
        return f"{self.condition[:60]} ({self.public_id})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def signs(self) -> bool:
        return bool(self.signing_salt)


class ReceivedDelivery(models.Model):
    """A delivery a trigger recorded a message for, by GitHub's delivery id (X-GitHub-Delivery) and, for a signed
    request, the digest of its signed body: a replay of either is acknowledged without a second message. Kept
    TRIGGER_DELIVERY_RETENTION_SECONDS (`manage.py prunetriggerdeliveries`)."""

    trigger = models.ForeignKey(WebhookTrigger, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=70)  # "id:" or "body:" + SHA-256 hex, never the raw header
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trigger", "fingerprint"], name="one_record_per_delivery_per_trigger")
        ]
        verbose_name = "received delivery"

    def __str__(self) -> str:
        return f"{self.fingerprint[:16]}… for trigger {self.trigger_id}"
