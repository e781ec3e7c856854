"""A request for approval dies with its asker (assistant/approval/requests.py, ``withdraw_pending``): a key revoked or
rolled, a trigger or a connection removed (ops/signals.py ``asker_gone``, sent by their services), an account
deactivated (saved with is_active off, as the admin does)."""

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from assistant.approval import requests as approvals
from ops.signals import asker_gone


@receiver(asker_gone)
def withdraw_what_it_asked_for(sender: Any, why: str, **sent: Any) -> None:
    asker = {name: sent[name] for name in ("key", "trigger", "connection") if name in sent}
    approvals.withdraw_pending(why=why, **asker)


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def withdraw_what_a_deactivated_account_was_asked(sender: Any, instance: Any, **kwargs: Any) -> None:
    if not instance.is_active:
        approvals.withdraw_pending(why="your account was deactivated", user=instance)
