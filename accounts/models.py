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
