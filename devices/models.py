from django.conf import settings
from django.db import models
from django.utils import timezone


class Status(models.TextChoices):
    PENDING = "pending", "Waiting for approval"
    APPROVED = "approved", "Approved, token not yet collected"
    DENIED = "denied", "Denied"
    CONSUMED = "consumed", "Approved, token collected"


class DeviceAuthorization(models.Model):
    """One `poke login` (RFC 8628, the device authorization grant): the CLI holds the device code and polls with it;
    the person types the short user code on /device and approves or denies. Approval issues one V2 key, handed to
    the CLI by the first poll after it, once. Only the device code's SHA-256 digest is kept."""

    device_code_digest = models.CharField(max_length=64, unique=True, editable=False)
    user_code = models.CharField(max_length=8, unique=True, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    client_name = models.CharField(max_length=200, blank=True, help_text="The client's User-Agent, cut short.")
    client_address = models.CharField(max_length=45, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="device_authorizations"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    api_key = models.ForeignKey("keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    collected_at = models.DateTimeField(null=True, blank=True)
    # The last poll that was answered (not told to slow down): polls sooner than CLI_AUTH_POLL_MIN_SECONDS after it
    # are answered slow_down (RFC 8628 3.5).
    last_polled_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "CLI log-in"

    def __str__(self) -> str:
        return f"{self.display_code} ({self.status})"

    @property
    def display_code(self) -> str:
        return f"{self.user_code[:4]}-{self.user_code[4:]}"

    @property
    def is_expired(self) -> bool:
        return timezone.now() >= self.expires_at
