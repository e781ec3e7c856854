from django.conf import settings
from django.db import models

from accounts.validators import validate_e164


class Channel(models.TextChoices):
    SMS = "sms", "SMS"
    WHATSAPP = "whatsapp", "WhatsApp"
    IMESSAGE = "imessage", "iMessage"


class Profile(models.Model):
    """What the legacy endpoint reports back: where the user's assistant reaches them."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    phone_number = models.CharField(max_length=16, blank=True, validators=[validate_e164])
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.SMS)

    def __str__(self) -> str:
        return f"Profile of {self.user}"
