"""Where a person talks to their assistant besides the console (DESIGN.md, "Channels"): the addresses they proved
are theirs, the one-time codes that prove it, and the provider message ids already recorded (a provider's retry is
a no-op)."""

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


# The outbox and quiet hours (channels/outbound/models.py), registered with this app.
from channels.outbound.models import OutboundMessage, QuietHours  # noqa: E402, F401
