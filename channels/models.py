"""Where a person talks to their assistant besides the console (docs/design.md#channels): the addresses they proved
are theirs, the one-time codes that prove it, and the provider message ids already recorded (a provider's retry is
a no-op); the outbox of texts going to them, and their quiet hours."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ChannelKind(models.TextChoices):
    SMS = "sms", "SMS"
    WHATSAPP = "whatsapp", "WhatsApp"
    IMESSAGE = "imessage", "iMessage"
    TELEGRAM = "telegram", "Telegram"


class LinkedAddress(models.Model):
    """An address (E.164 for the phone channels, the chat id for Telegram) a person proved is theirs. It belongs to
    one person at a time: the unique constraint, not a read-then-write, holds that. Unlinking deletes the row."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="linked_addresses")
    channel = models.CharField(max_length=16, choices=ChannelKind.choices)
    address = models.CharField(max_length=64)
    linked_at = models.DateTimeField(default=timezone.now, editable=False)
    # When the person last wrote from here: outbound routing prefers the channel they last wrote from.
    last_inbound_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["channel", "address"], name="channels_address_one_person"),
        ]
        indexes = [models.Index(fields=["user", "channel"])]
        verbose_name_plural = "linked addresses"

    def __str__(self) -> str:
        return f"{self.get_channel_display()} {self.address}"


class LinkCode(models.Model):
    """A pending proof of ownership. Phone channels: a 6-digit code sent to ``address``, stored as a keyed digest
    (code_digest). Telegram: a one-time deep-link token (``t.me/<bot>?start=<token>``), stored as its SHA-256 digest,
    ``address`` empty until the bot's /start links the chat. Expires after LINK_CODE_TTL_SECONDS; at most
    LINK_CODE_MAX_TRIES wrong entries; used once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="link_codes")
    channel = models.CharField(max_length=16, choices=ChannelKind.choices)
    address = models.CharField(max_length=64, blank=True)
    code_digest = models.CharField(max_length=64)
    tries = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"]), models.Index(fields=["code_digest"])]

    def __str__(self) -> str:
        return f"Link code for {self.get_channel_display()} {self.address or '(deep link)'}"


class InboundEvent(models.Model):
    """A provider's message id, recorded once: the unique constraint makes a provider's retry a no-op. ``message`` is
    the thread message it became (none for an unknown sender, a link, or a message without content)."""

    channel = models.CharField(max_length=16, choices=ChannelKind.choices)
    provider_message_id = models.CharField(max_length=128)
    address = models.CharField(max_length=64)
    message = models.OneToOneField(
        "conversations.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="channel_event"
    )
    received_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["channel", "provider_message_id"], name="channels_inbound_once"),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.provider_message_id}"


class LinkHint(models.Model):
    """When an unknown address was last told how to link (at most one such answer per address per day)."""

    channel = models.CharField(max_length=16, choices=ChannelKind.choices)
    address = models.CharField(max_length=64)
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "address"], name="channels_one_hint_row")]

    def __str__(self) -> str:
        return f"Link hint to {self.channel} {self.address}"


# --- The outbox (channels/outbound/) -------------------------------------------------------------------------------
# One row per text a provider is asked to send (a long message is several parts, each its own row). Its life
# (channels/outbound/queue.py, on delivery/leases.py): queued → processing (a worker sends it under a lease) →
# sent, or back to queued with a backoff after a failure the provider may get over, or failed; held when WhatsApp's
# 24-hour window is closed and no approved template is configured (until the person writes there again, or staff
# send it again). Once sent, the provider's own statuses follow in ``provider_status`` (queued, sent, delivered,
# read, failed, undelivered), from its callbacks.


class OutboundStatus(models.TextChoices):
    QUEUED = "queued", "Waiting to be sent"
    PROCESSING = "processing", "Being sent"
    SENT = "sent", "Handed to the provider"
    FAILED = "failed", "Not sent (gave up)"
    HELD = "held", "Held"


# Waiting for a worker or held by one: what the per-person order and the queue's index look at.
OUTBOX_PENDING = [OutboundStatus.QUEUED, OutboundStatus.PROCESSING]

# The provider's statuses in the order a message goes through them; a late callback never moves one back.
PROVIDER_STATUS_RANK = {"queued": 0, "sent": 1, "delivered": 2, "read": 3, "undelivered": 4, "failed": 4}


class OutboundMessage(models.Model):
    message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="outbound")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    part = models.PositiveSmallIntegerField(default=1)
    parts = models.PositiveSmallIntegerField(default=1)
    channel = models.CharField(max_length=16)
    address = models.CharField(max_length=64)
    text = models.TextField()
    status = models.CharField(max_length=16, choices=OutboundStatus.choices, default=OutboundStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    takeovers = models.PositiveIntegerField(default=0, help_text="Times a worker's lease expired mid-send.")
    last_error = models.TextField(blank=True)
    held_reason = models.TextField(blank=True)
    waiting_for_quiet_hours = models.BooleanField(default=False)
    as_template = models.BooleanField(default=False, help_text="Sent as the operator's approved WhatsApp template.")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    provider_message_id = models.CharField(max_length=128, blank=True)
    provider_status = models.CharField(max_length=16, blank=True)
    provider_error = models.CharField(max_length=255, blank=True)
    provider_status_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        verbose_name = "outbound text"
        indexes = [
            models.Index(fields=["id"], name="outbox_pending", condition=models.Q(status__in=OUTBOX_PENDING)),
            models.Index(
                fields=["person", "id"], name="outbox_pending_by_person", condition=models.Q(status__in=OUTBOX_PENDING)
            ),
            models.Index(
                fields=["person"],
                name="outbox_processing_by_person",
                condition=models.Q(status=OutboundStatus.PROCESSING),
            ),
            # The admin's list of failed and held texts, the few that staff act on (channels/outbound/admin.py).
            models.Index(
                fields=["id"],
                name="outbox_failed_or_held",
                condition=models.Q(status__in=[OutboundStatus.FAILED, OutboundStatus.HELD]),
            ),
            models.Index(
                fields=["provider_message_id"],
                name="outbox_by_provider_id",
                condition=~models.Q(provider_message_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} text {self.part}/{self.parts} of message {self.message_id} ({self.status})"

    @property
    def shown_status(self) -> str:
        """What the person and staff read: the provider's latest word once sent, else ours."""
        if self.status == OutboundStatus.SENT and self.provider_status:
            return self.provider_status
        if self.status == OutboundStatus.QUEUED and self.waiting_for_quiet_hours:
            return "quiet hours"
        return str(self.status)


class QuietHours(models.Model):
    """A span of the person's day, in their profile's time zone, when nothing is sent to their phone."""

    person = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quiet_hours")
    starts = models.TimeField()
    ends = models.TimeField()

    class Meta:
        verbose_name_plural = "quiet hours"

    def __str__(self) -> str:
        return f"Quiet {self.starts:%H:%M}–{self.ends:%H:%M} for {self.person}"
