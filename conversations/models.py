import re
import secrets
import string

from django.conf import settings
from django.db import models
from django.utils import timezone

_ID_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
MESSAGE_ID_PREFIX = "msg_"
MESSAGE_ID_LENGTH = len(MESSAGE_ID_PREFIX) + 24
_MESSAGE_ID = re.compile(r"msg_[0-9A-Za-z]{24}")


_ID_DIGITS = MESSAGE_ID_LENGTH - len(MESSAGE_ID_PREFIX)
# A random byte picks a character when it is one of the first 248 values (four whole alphabets): byte % 62. The other
# eight values are dropped, so every character is equally likely, each one drawn apart from the others.
_KEPT_BYTES = 4 * len(_ID_ALPHABET)
_BYTE_TO_CHARACTER = bytes(ord(_ID_ALPHABET[value % len(_ID_ALPHABET)]) for value in range(256))
_DROPPED_BYTES = bytes(range(_KEPT_BYTES, 256))
_DRAWN_BYTES = _ID_DIGITS + 8  # 24 or more of 32 are kept but for about one draw in ten million: then draw again


def new_message_id() -> str:
    """A public id such as msg_4fT9…: random (143 bits), so ids reveal neither counts nor other users' messages.

    Each character uniform over the 62 and independent of the others, as a secrets.choice per character would draw
    them, from one read of random bytes mapped and filtered in C (it runs for every accepted message: a loop of
    Python per character cost some 70 calls)."""
    while True:
        drawn = secrets.token_bytes(_DRAWN_BYTES).translate(_BYTE_TO_CHARACTER, _DROPPED_BYTES)
        if len(drawn) >= _ID_DIGITS:
            return MESSAGE_ID_PREFIX + drawn[:_ID_DIGITS].decode("ascii")


def is_message_id(value: str) -> bool:
    """Whether a caller's value has the shape of a public id. Check it before it reaches a query: anything else
    cannot match, and a NUL character in a query is an error (a 500) on PostgreSQL."""
    return _MESSAGE_ID.fullmatch(value) is not None


class Conversation(models.Model):
    """The user's one thread with their assistant."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversation")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"Conversation of {self.user}"


class Role(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"  # a long-running tool's follow-up, posted back later (the poke.mcp callback protocol)


class Source(models.TextChoices):
    APP = "app", "Typed in the app"
    API = "api", "API"
    LEGACY_WEBHOOK = "legacy_webhook", "Legacy webhook"
    WEBHOOK_TRIGGER = "webhook_trigger", "Webhook trigger"
    ASSISTANT = "assistant", "Assistant"
    TOOL_FOLLOW_UP = "tool_follow_up", "Tool follow-up"
    REMINDER = "reminder", "Reminder"
    APPROVAL = "approval", "Your approval"  # the person approved an action the assistant asked for
    # What the person wrote on a linked channel (channels/): the channel itself, shown on the message.
    SMS = "sms", "SMS"
    WHATSAPP = "whatsapp", "WhatsApp"
    IMESSAGE = "imessage", "iMessage"
    TELEGRAM = "telegram", "Telegram"


class Message(models.Model):
    # What callers and staff quote; the integer primary key stays internal. Unique through a constraint rather
    # than unique=True, which on PostgreSQL adds a second (LIKE) index that no query uses.
    public_id = models.CharField(max_length=MESSAGE_ID_LENGTH, default=new_message_id, editable=False)
    # db_index=False: the (conversation, created_at, id) index below serves every lookup by conversation.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    text = models.TextField(blank=True)
    # The whole JSON body the caller sent, forwarded to the assistant as context.
    context = models.JSONField(null=True, blank=True)
    api_key = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    # The webhook trigger whose firing recorded the message (source webhook_trigger); no key is involved then.
    trigger = models.ForeignKey(
        "triggers.WebhookTrigger", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # What became of its delivery (delivered or failed), written when that row is pruned (delivery/retention.py), so
    # that the receipt and the console still say it; blank while the delivery row exists (it says so) or never was.
    outcome = models.CharField(max_length=16, blank=True, default="", db_default="", editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        # A thread in its own order, exactly: a page of it (the newest, those since a poll, those before a message)
        # is read in the index's order and stops after the page, whatever the planner guesses about how many rows
        # match (with (conversation, created_at) alone it could sort every match first: 205 ms for a page after a
        # burst of 11k messages).
        indexes = [models.Index(fields=["conversation", "created_at", "id"], name="message_thread_order")]
        constraints = [models.UniqueConstraint(fields=["public_id"], name="conversations_message_public_id_unique")]

    def __str__(self) -> str:
        return f"{self.get_role_display()}: {self.text[:60]}"


class Endpoint(models.TextChoices):
    CURRENT = "api_message", "POST /api/v1/inbound/api-message"
    LEGACY = "legacy_webhook", "POST /api/v1/inbound-sms/webhook"
    CONSOLE = "console", "Console"
    WEBHOOK_TRIGGER = "webhook_trigger", "POST /api/v1/inbound/webhook"
    FOLLOW_UP = "follow_up", "POST /api/v1/mcp/callback (a tool's follow-up)"
    CHANNEL = "channel", "A linked channel (/channels/)"
    APPROVAL = "approval", "An approval given in the console"


class DeliveryStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    PROCESSING = "processing", "Processing"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


# A delivery still to be handed over (waiting or being attempted): what the queue and the per-thread order look at.
PENDING = [DeliveryStatus.QUEUED, DeliveryStatus.PROCESSING]


class AssistantBackend(models.TextChoices):
    LOCAL = "local", "Built-in local assistant"
    WEBHOOK = "webhook", "Signed webhook"
    OPENAI = "openai", "OpenAI-compatible chat completions"


class Delivery(models.Model):
    """How an accepted message reached (or is reaching) the user's assistant: what staff inspect.

    queued → processing → delivered, or back to queued (with next_attempt_at) after a transient failure, or failed
    once the attempts or takeovers are used up or the assistant refuses the message for good. Every change of its
    state goes through delivery/lifecycle.py (its docstring has the whole diagram).
    """

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="delivery")
    # The message's key, repeated so the key page and the admin can read a key's deliveries by (api_key, created_at)
    # without a join. The message's column carries the database constraint; this copy does not, so recording a
    # message checks (and share-locks) the key's row once, not twice: under concurrent requests with one key that
    # lock is what PostgreSQL's row-sharing bookkeeping contends on. Deleting a key still sets it to NULL (the ORM).
    # db_index=False: the (api_key, created_at) index below serves every lookup by key.
    api_key = models.ForeignKey(
        "keys.ApiKey",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deliveries",
        db_index=False,
        db_constraint=False,
    )
    # The message's thread, repeated so that the delivery queue can keep each thread's deliveries in order (one at a
    # time, in the order accepted) with one index (delivery/queue.py). No constraint, as for api_key.
    conversation = models.ForeignKey(
        Conversation,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_index=False,
        db_constraint=False,
    )
    endpoint = models.CharField(max_length=16, choices=Endpoint.choices)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    # How many claims found it processing under an expired lease (its worker died or was cut off); after
    # DELIVERY_MAX_TAKEOVERS the delivery fails (delivery/lifecycle.py).
    takeovers = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    # The assistant backend of the latest attempt (the configured one while still queued).
    backend = models.CharField(max_length=16, choices=AssistantBackend.choices, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the latest attempt started.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When the latest attempt ended.")
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="When a scheduled retry is due.")
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While processing: when the attempt counts as abandoned (its worker died) and any worker takes it.",
    )
    reply = models.OneToOneField(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="answered_delivery"
    )
    # The webhook-id of the callback that brought the reply, so that a replayed callback changes nothing.
    callback_id = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["api_key", "created_at"]),
            models.Index(fields=["status", "created_at"]),
            # The queue (delivery/queue.py): the pending deliveries in acceptance order, and each thread's pending ones.
            models.Index(fields=["id"], name="delivery_pending", condition=models.Q(status__in=PENDING)),
            models.Index(
                fields=["conversation", "id"], name="delivery_pending_by_thread", condition=models.Q(status__in=PENDING)
            ),
            # The per-thread rule's other half: is a later delivery of the thread in flight (delivery/leases.py)?
            models.Index(
                fields=["conversation"],
                name="delivery_processing_by_thread",
                condition=models.Q(status=DeliveryStatus.PROCESSING),
            ),
        ]

    def __str__(self) -> str:
        return f"Delivery of message {self.message_id} ({self.status})"
