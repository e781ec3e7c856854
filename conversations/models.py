from django.conf import settings
from django.db import models
from django.utils import timezone


class Conversation(models.Model):
    """The user's one thread with their assistant."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversation")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"Conversation of {self.user}"


class Role(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Source(models.TextChoices):
    APP = "app", "Typed in the app"
    API = "api", "API"
    LEGACY_WEBHOOK = "legacy_webhook", "Legacy webhook"
    ASSISTANT = "assistant", "Assistant"


class Message(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    text = models.TextField(blank=True)
    # The whole JSON body the caller sent, forwarded to the assistant as context.
    context = models.JSONField(null=True, blank=True)
    api_key = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return f"{self.get_role_display()}: {self.text[:60]}"


class Endpoint(models.TextChoices):
    CURRENT = "api_message", "POST /api/v1/inbound/api-message"
    LEGACY = "legacy_webhook", "POST /api/v1/inbound-sms/webhook"
    CONSOLE = "console", "Console"


class DeliveryStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    PROCESSING = "processing", "Processing"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    """How an accepted message reached (or is reaching) the user's assistant: what staff inspect."""

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="delivery")
    api_key = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    endpoint = models.CharField(max_length=16, choices=Endpoint.choices)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["api_key", "created_at"]), models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"Delivery of message {self.message_id} ({self.status})"
