"""The audit log of an account: keys created, rolled, renamed, revoked, expired, their scopes and tool policy
changed; approvals given, denied or expired; webhooks and connections added or removed. Every service that makes
such a change calls ``record`` with who did it (``by``: one of the phrases below, or ``by_key``)."""

from contextlib import suppress
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import AuditEvent, AuditKind

CONSOLE = "you, in the console"
ADMIN = "staff, in the admin"
COMMAND = "a management command on the server"
SYSTEM = "the service"  # a time that passed: an expiry


def from_phone(channel: str) -> str:
    """An answer given on a linked channel ("you, from Telegram")."""
    return f"you, from {channel}"


def by_key(name: str, hint: str) -> str:
    return f"API key “{name}” ({hint})"


def record(
    account: User | int,
    kind: AuditKind,
    summary: str,
    *,
    by: str,
    at: datetime | None = None,
    once: str | None = None,
) -> None:
    """Add an event. ``once``: a name that makes a second record of the same event a no-op (a key's expiry)."""
    account_id = account if isinstance(account, int) else account.pk
    event = AuditEvent(
        account_id=account_id, at=at or timezone.now(), kind=kind, summary=summary[:500], actor=by[:200], once=once
    )
    if once is None:
        event.save()
        return
    # A savepoint: a duplicate (recorded already) must not break the caller's transaction.
    with suppress(IntegrityError), transaction.atomic():
        event.save()
