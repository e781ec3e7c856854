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

from accounts import audit
from accounts.models import AuditKind
from accounts.services import lock_account, lock_room
from keys import tokens
from keys.models import ApiKey, Generation
from keys.scopes import CONSOLE_DEFAULT, LEGACY_V1, Scope, stored
from ops.signals import asker_gone
from ops.visible import refusal

logger = logging.getLogger(__name__)


def key_name_field(**options: Any) -> forms.CharField:
    """A key's name wherever one is typed (the console's form, createapikey, the admin): stripped, not blank, no NUL
    (PostgreSQL cannot store it), no control or direction characters (ops/visible.py), no longer than the column."""
    options.setdefault("error_messages", {"required": "Give the key a name, for example the automation it is for."})
    options.setdefault("validators", [validate_key_name])
    return forms.CharField(max_length=ApiKey._meta.get_field("name").max_length, **options)


def validate_key_name(name: str) -> None:
    refused = refusal("The name", name)
    if refused:
        raise forms.ValidationError(refused, code="hidden_characters")


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ValueError("A key needs a name, for example the automation it is for.")
    refused = refusal("The name", name)
    if refused:
        raise ValueError(refused)
    return name


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
    expires_at: datetime | None = None,
    tools_need_approval: bool = True,
    test_mode: bool = False,
    by: str = audit.COMMAND,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which exists nowhere else and cannot be recovered.

    ``scopes``: what a V2 key may do (default: the console's, messages:send and receipts:read). A V1 key does what
    V1 keys always did (keys/scopes.py LEGACY_V1). ``may_read_replies`` adds replies:read: receipts read with the
    key carry the assistant's reply. ``expires_at``: after it the key is refused (401 expired_api_key). ``by``: who
    asked, for the audit log. ``test_mode``: a test key (keys/models.py). Raises KeyLimitReached when the owner
    already holds MAX_ACTIVE_KEYS_PER_ACCOUNT active keys."""
    name = _checked_name(name)
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("A key's expiry must be in the future.")
    granted = set(LEGACY_V1 if generation == Generation.V1 else CONSOLE_DEFAULT if scopes is None else scopes)
    if may_read_replies:
        granted.add(Scope.REPLIES_READ)
    plaintext = tokens.generate(generation)
    with transaction.atomic():
        active = ApiKey.objects.active().filter(owner=owner)
        lock_room(owner, active, settings.MAX_ACTIVE_KEYS_PER_ACCOUNT, KeyLimitReached)
        key = ApiKey.objects.create(
            owner=owner,
            name=name,
            generation=generation,
            digest=tokens.digest(plaintext),
            hint=tokens.hint(plaintext),
            scopes=stored(granted),
            expires_at=expires_at,
            tools_need_approval=tools_need_approval,
            test_mode=test_mode,
        )
        what = f"{'test key ' if test_mode else ''}“{key.name}” ({key.hint}) {_scopes_and_expiry(key)}"
        audit.record(owner, AuditKind.KEY_CREATED, what, by=by)
    return key, plaintext


def _scopes_and_expiry(key: ApiKey) -> str:
    scopes = key.scopes.replace(" ", ", ") or "no scopes"
    until = f", expires {key.expires_at:%Y-%m-%d %H:%M} UTC" if key.expires_at else ", no expiry"
    return f"with {scopes}{until}"


class RollRefused(Exception):
    """The key cannot be rolled (revoked, expired, a V1 key, or rolled already); ``str()`` says why."""


def roll_key(key: ApiKey, overlap: timedelta, *, by: str = audit.COMMAND) -> tuple[ApiKey, str]:
    """A new secret for a key: a new key with the same name, scopes and expiry, and the old secret working for
    ``overlap`` more (zero: not at all), so that whatever holds it can be moved over. Returns the new key and its
    plaintext, shown once like any new key's."""
    now = timezone.now()
    if overlap < timedelta(0):
        raise ValueError("The overlap cannot be negative.")
    with transaction.atomic():
        lock_account(key.owner)
        current = ApiKey.objects.select_for_update().get(pk=key.pk)
        if current.generation != Generation.V2:
            raise RollRefused("A V1 key cannot be rolled: create a V2 key instead.")
        if current.is_revoked or current.is_expired(now):
            raise RollRefused("Only an active key can be rolled: this one is revoked or expired.")
        if current.replaced_by_id is not None:
            raise RollRefused("This key was rolled already: roll the key that replaced it.")
        plaintext = tokens.generate(Generation.V2)
        new = ApiKey.objects.create(
            owner_id=current.owner_id,
            name=current.name,
            generation=Generation.V2,
            digest=tokens.digest(plaintext),
            hint=tokens.hint(plaintext),
            scopes=current.scopes,
            scopes_predate_choice=current.scopes_predate_choice,
            expires_at=current.expires_at,
            tool_access=current.tool_access,
            allowed_tools=current.allowed_tools,
            tools_need_approval=current.tools_need_approval,
            test_mode=current.test_mode,
        )
        old_until = now + overlap
        if current.expires_at is not None:
            old_until = min(old_until, current.expires_at)
        ApiKey.objects.filter(pk=current.pk).update(expires_at=old_until, replaced_by=new)
        # What the old key asked the person to approve dies with it, whatever the overlap
        # (assistant/approval/requests.py).
        asker_gone.send(ApiKey, key=current, why=f"the API key “{current.name}” that asked for it was rolled")
        audit.record(
            current.owner_id,
            AuditKind.KEY_ROLLED,
            f"“{current.name}”: new secret {new.hint}; the old one ({current.hint}) works until "
            f"{old_until:%Y-%m-%d %H:%M:%S} UTC",
            by=by,
        )
    key.expires_at, key.replaced_by = old_until, new
    return new, plaintext


def set_tool_policy(
    key: ApiKey, access: str, allowed: list[str], needs_approval: bool, *, by: str = audit.COMMAND
) -> None:
    """What the assistant may do for the key's messages (assistant/tools/toolbox.py), from its next message on."""
    listed = sorted(set(allowed)) if access == "listed" else []
    with transaction.atomic():
        ApiKey.objects.filter(pk=key.pk).update(
            tool_access=access, allowed_tools=listed, tools_need_approval=needs_approval
        )
        listing = f" ({', '.join(listed) or 'none'})" if access == "listed" else ""
        approval = "approval first" if needs_approval else "no approval"
        summary = f"“{key.name}” ({key.hint}): tools {access}{listing}, {approval}"
        audit.record(key.owner_id, AuditKind.KEY_TOOLS_CHANGED, summary, by=by)
    key.tool_access, key.allowed_tools, key.tools_need_approval = access, listed, needs_approval


def rename_key(key: ApiKey, name: str, *, by: str = audit.COMMAND) -> bool:
    name = _checked_name(name)
    if name == key.name:
        return False
    old = key.name
    with transaction.atomic():
        ApiKey.objects.filter(pk=key.pk).update(name=name)
        audit.record(key.owner_id, AuditKind.KEY_RENAMED, f"“{old}” ({key.hint}) is now “{name}”", by=by)
    key.name = name
    return True


def note_expired(key: ApiKey) -> None:
    """Record in the audit log that a key expired, once, whoever notices first (its first refused request, or the
    owner's audit log). Dated at its expiry."""
    if key.expires_at is None or key.is_revoked:
        return
    rolled = " (its overlap after a roll ended)" if key.replaced_by_id else ""
    audit.record(
        key.owner_id,
        AuditKind.KEY_EXPIRED,
        f"“{key.name}” ({key.hint}) expired{rolled}",
        by=audit.SYSTEM,
        at=key.expires_at,
        once=f"key-expired:{key.pk}:{key.expires_at.timestamp():.0f}",
    )


def note_expiries(owner_id: int) -> None:
    """Record every expiry of the owner's keys not recorded yet (before their audit log is shown)."""
    for key in ApiKey.objects.filter(owner_id=owner_id, revoked_at__isnull=True, expires_at__lte=timezone.now()):
        note_expired(key)


def set_scopes(key: ApiKey, scopes: Iterable[Scope], *, by: str = audit.COMMAND) -> bool:
    """The owner's choice, on the key's page: what a V2 key may do from its next request on. Returns whether
    anything changed."""
    text = stored(scopes)
    with transaction.atomic():
        changed = (
            ApiKey.objects.filter(pk=key.pk, generation=Generation.V2)
            .exclude(scopes=text)
            .update(scopes=text, scopes_predate_choice=False)
        )
        if changed:
            before = key.scopes.replace(" ", ", ") or "none"
            after = text.replace(" ", ", ") or "none"
            summary = f"“{key.name}” ({key.hint}): {before} → {after}"
            audit.record(key.owner_id, AuditKind.KEY_SCOPES_CHANGED, summary, by=by)
    if changed:
        key.scopes, key.scopes_predate_choice = text, False
    return bool(changed)


def revoke_key(key: ApiKey, *, by: str = audit.COMMAND) -> bool:
    """Revoke a key from the next request on. Returns False if it was already revoked (revocation is one-way)."""
    now = timezone.now()
    with transaction.atomic():
        updated = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now)
        if updated:
            audit.record(key.owner_id, AuditKind.KEY_REVOKED, f"“{key.name}” ({key.hint})", by=by)
            # Its requests for approval die with it (assistant/approval/requests.py), in this transaction.
            asker_gone.send(ApiKey, key=key, why=f"the API key “{key.name}” that asked for it was revoked")
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
