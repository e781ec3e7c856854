"""Every way a key is created or revoked (console, admin, management command) goes through these functions."""

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from accounts.services import lock_account
from keys import tokens
from keys.models import ApiKey, Generation
from keys.scopes import CONSOLE_DEFAULT, LEGACY_V1, Scope, stored

logger = logging.getLogger(__name__)


def key_name_field(**options: Any) -> forms.CharField:
    """A key's name wherever one is typed (the console's form, createapikey): stripped, not blank, no NUL (PostgreSQL
    cannot store it), no longer than the column."""
    options.setdefault("error_messages", {"required": "Give the key a name, for example the automation it is for."})
    return forms.CharField(max_length=ApiKey._meta.get_field("name").max_length, **options)


class KeyLimitReached(Exception):
    """The account already holds MAX_ACTIVE_KEYS_PER_ACCOUNT active keys: no key was created. ``str()`` says what
    to do, for whoever shows it (the console's form, a command, an API answer)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"This account already has {limit} active API keys, the most it may hold. Revoke a key you no longer "
            "use, then add the new one."
        )
        self.limit = limit


def has_room_for_a_key(owner: User) -> bool:
    """Whether the owner may hold one more active key (a check to show early; create_key enforces it)."""
    return ApiKey.objects.active().filter(owner=owner).count() < settings.MAX_ACTIVE_KEYS_PER_ACCOUNT


def create_key(
    owner: User,
    name: str,
    generation: Generation = Generation.V2,
    *,
    scopes: Iterable[Scope] | None = None,
    may_read_replies: bool = False,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which exists nowhere else and cannot be recovered.

    ``scopes``: what a V2 key may do (default: the console's, messages:send and receipts:read). A V1 key does what
    V1 keys always did (keys/scopes.py LEGACY_V1). ``may_read_replies`` adds replies:read: receipts read with the
    key carry the assistant's reply. Raises KeyLimitReached when the owner already holds
    MAX_ACTIVE_KEYS_PER_ACCOUNT active keys."""
    name = name.strip()
    if not name:
        raise ValueError("A key needs a name, for example the automation it is for.")
    granted = set(LEGACY_V1 if generation == Generation.V1 else CONSOLE_DEFAULT if scopes is None else scopes)
    if may_read_replies:
        granted.add(Scope.REPLIES_READ)
    plaintext = tokens.generate(generation)
    limit = settings.MAX_ACTIVE_KEYS_PER_ACCOUNT
    with transaction.atomic():
        lock_account(owner)
        if ApiKey.objects.active().filter(owner=owner).count() >= limit:
            raise KeyLimitReached(limit)
        key = ApiKey.objects.create(
            owner=owner,
            name=name,
            generation=generation,
            digest=tokens.digest(plaintext),
            hint=tokens.hint(plaintext),
            scopes=stored(granted),
        )
    return key, plaintext


def set_scopes(key: ApiKey, scopes: Iterable[Scope]) -> bool:
    """The owner's choice, on the key's page: what a V2 key may do from its next request on. Returns whether
    anything changed."""
    text = stored(scopes)
    changed = (
        ApiKey.objects.filter(pk=key.pk, generation=Generation.V2)
        .exclude(scopes=text)
        .update(scopes=text, scopes_predate_choice=False)
    )
    if changed:
        key.scopes, key.scopes_predate_choice = text, False
    return bool(changed)


def revoke_key(key: ApiKey) -> bool:
    """Revoke a key from the next request on. Returns False if it was already revoked (revocation is one-way)."""
    now = timezone.now()
    updated = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now)
    if updated:
        key.revoked_at = now
    else:
        key.refresh_from_db(fields=["revoked_at"])
    return bool(updated)


def find_key(plaintext: str) -> ApiKey | None:
    presented = tokens.recognise(plaintext.strip())
    if presented is None:
        return None
    return ApiKey.objects.select_related("owner").filter(digest=presented.digest).first()


def note_key_used(key: ApiKey) -> None:
    """Record when a key was last used, at most once per resolution window, so busy keys do not write per request.

    Best effort: it runs after the message it stamps for has been written (committed, outside a transaction), so a
    failure here is logged, not raised. Raised, it would answer 503 "nothing was recorded" for a recorded message,
    and the caller's retry would send it twice."""
    now = timezone.now()
    resolution = timedelta(seconds=settings.KEY_LAST_USED_RESOLUTION_SECONDS)
    if key.last_used_at is not None and now - key.last_used_at < resolution:
        return
    try:
        if connection.in_atomic_block:
            with transaction.atomic():  # a savepoint: a failed stamp must not break the caller's transaction
                _stamp(key, now)
        else:
            _stamp(key, now)
    except DatabaseError as error:
        logger.warning("could not record the last use of API key %s: %s", key.pk, type(error).__name__)
        return
    key.last_used_at = now


def _stamp(key: ApiKey, now: datetime) -> None:
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
