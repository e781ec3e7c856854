from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from conversations.models import Conversation


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def give_every_user_a_conversation(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        Conversation.objects.get_or_create(user=instance)
