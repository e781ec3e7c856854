"""Every way a webhook trigger is created, found, fired or revoked (the API, the console, the admin) goes through
these functions; so does anything that lists a person's triggers (``triggers_of``, e.g. for the assistant)."""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from accounts import audit
from accounts.models import AuditKind
from accounts.services import lock_room
from keys import tokens
from keys.models import ApiKey
from ops.pruning import delete_in_batches
from ops.signals import asker_gone
from ops.visible import refusal
from triggers.models import ACTION_MAX_LENGTH, CONDITION_MAX_LENGTH, ReceivedDelivery, WebhookTrigger
from triggers.summaries import summarise

# pwh_ + 32 base62 characters (190 random bits) + a 6-character checksum, like a V2 key: a typo is refused before
# any query, and secret scanners can match pwh_[0-9A-Za-z]{38}.
TOKEN_PREFIX = "pwh_"
# The signing secret for X-Hub-Signature-256: pws_ + 64 hex characters, derived, never stored.
SIGNING_PREFIX = "pws_"
_SIGNING_SALT = "triggers.WebhookTrigger.signing_secret"


class InvalidTrigger(ValueError):
    """A condition or action that cannot make a trigger; the message says which and why."""


class TriggerLimitReached(Exception):
    """The account already holds MAX_ACTIVE_TRIGGERS_PER_ACCOUNT active triggers: none was made."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"This account already has {limit} active webhook triggers, the most it may hold. Revoke one you no "
            "longer use (console, Webhooks), then make the new one."
        )
        self.limit = limit


def _clean(value: object, name: str, limit: int, example: str) -> str:
    if not isinstance(value, str):
        raise InvalidTrigger(f"'{name}' must be a string, for example {example}.")
    text = value.strip()
    if not text:
        raise InvalidTrigger(f"'{name}' is blank; write it out, for example {example}.")
    if len(text) > limit:
        raise InvalidTrigger(f"'{name}' is longer than {limit} characters.")
    if "\x00" in text:
        raise InvalidTrigger(f"'{name}' contains a NUL character (\\u0000), which cannot be stored.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidTrigger(f"'{name}' contains an unpaired UTF-16 surrogate, which cannot be stored.") from None
    return text


def clean_condition(value: object) -> str:
    """The trigger's name, as the console and approval requests show it: no control or direction characters."""
    condition = _clean(value, "condition", CONDITION_MAX_LENGTH, '"When a new order is placed"')
    hidden = refusal("'condition'", condition)
    if hidden:
        raise InvalidTrigger(hidden)
    return condition


def clean_action(value: object) -> str:
    return _clean(value, "action", ACTION_MAX_LENGTH, '"Send me a summary of the order"')


def token_digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def looks_like_token(plaintext: str) -> bool:
    return tokens.is_checked(plaintext, TOKEN_PREFIX)


def create_trigger(
    owner: User, condition: object, action: object, *, created_with: ApiKey | None = None, signed: bool = False
) -> tuple[WebhookTrigger, str, str | None]:
    """Create a trigger; returns it with its token and, when ``signed``, its signing secret. Neither exists anywhere
    else afterwards, and neither can be recovered. Raises InvalidTrigger for a bad condition or action, and
    TriggerLimitReached when the owner already holds MAX_ACTIVE_TRIGGERS_PER_ACCOUNT active triggers."""
    condition, action = clean_condition(condition), clean_action(action)
    plaintext = tokens.generate_checked(TOKEN_PREFIX)
    with transaction.atomic():
        active = WebhookTrigger.objects.active().filter(owner=owner)
        lock_room(owner, active, settings.MAX_ACTIVE_TRIGGERS_PER_ACCOUNT, TriggerLimitReached)
        trigger = WebhookTrigger.objects.create(
            owner=owner,
            condition=condition,
            action=action,
            digest=token_digest(plaintext),
            hint=f"{TOKEN_PREFIX}…{plaintext[-4:]}",
            signing_salt=secrets.token_hex(16) if signed else "",
            created_with=created_with,
        )
        by = audit.CONSOLE if created_with is None else audit.by_key(created_with.name, created_with.hint)
        audit.record(owner, AuditKind.WEBHOOK_ADDED, f"“{_short(condition)}” ({trigger.hint})", by=by)
    return trigger, plaintext, signing_secret(trigger) if signed else None


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:79] + "…"


def find_by_token(plaintext: str) -> WebhookTrigger | None:
    """The trigger whose token this is (revoked or not), or None; a malformed token costs no query."""
    if not looks_like_token(plaintext):
        return None
    return WebhookTrigger.objects.select_related("owner").filter(digest=token_digest(plaintext)).first()


def revoke_trigger(trigger: WebhookTrigger, *, by: str = audit.COMMAND) -> bool:
    """Stop a trigger from its next request on. False if it was already revoked (revocation is one-way)."""
    now = timezone.now()
    with transaction.atomic():
        updated = WebhookTrigger.objects.filter(pk=trigger.pk, revoked_at__isnull=True).update(revoked_at=now)
        if updated:
            summary = f"“{_short(trigger.condition)}” ({trigger.hint})"
            audit.record(trigger.owner_id, AuditKind.WEBHOOK_REMOVED, summary, by=by)
            why = f"the webhook trigger “{_short(trigger.condition)}” that asked for it was removed"
            asker_gone.send(WebhookTrigger, trigger=trigger, why=why)  # its requests die with it, in this transaction
    if updated:
        trigger.revoked_at = now
    else:
        trigger.refresh_from_db(fields=["revoked_at"])
    return bool(updated)


def note_fired(trigger: WebhookTrigger) -> None:
    """Count a firing that recorded a message (in the same transaction when there is one)."""
    now = timezone.now()
    WebhookTrigger.objects.filter(pk=trigger.pk).update(fire_count=F("fire_count") + 1, last_fired_at=now)
    trigger.last_fired_at = now


def triggers_of(user: User) -> list[WebhookTrigger]:
    """A person's active triggers, newest first (what the assistant may be told about: no secrets in them)."""
    return list(WebhookTrigger.objects.active().filter(owner=user).order_by("-created_at"))


# --- signing (GitHub's X-Hub-Signature-256) ----------------------------------------------------------------------


def _secret_with(trigger: WebhookTrigger, server_key: str) -> str:
    derived = salted_hmac(_SIGNING_SALT, f"{trigger.public_id}:{trigger.signing_salt}", secret=server_key,
                          algorithm="sha256")  # fmt: skip
    return SIGNING_PREFIX + derived.hexdigest()


def signing_secret(trigger: WebhookTrigger) -> str:
    """The trigger's signing secret: derived from SECRET_KEY and the trigger's salt, so the database alone does not
    hold it. Rotating SECRET_KEY keeps old secrets working while the old key is in SECRET_KEY_FALLBACKS."""
    if not trigger.signs:
        raise ValueError("This trigger has no signing secret.")
    return _secret_with(trigger, settings.SECRET_KEY)


def new_signing_secret(trigger: WebhookTrigger) -> str:
    """Give the trigger a (new) signing secret; an earlier one stops working."""
    trigger.signing_salt = secrets.token_hex(16)
    trigger.save(update_fields=["signing_salt"])
    return signing_secret(trigger)


def signature_matches(trigger: WebhookTrigger, body: bytes, header: str) -> bool:
    """Whether header is 'sha256=' + the hex HMAC-SHA256 of body under the trigger's signing secret (GitHub's
    X-Hub-Signature-256), with the current SECRET_KEY or a fallback."""
    if not trigger.signs or not header.startswith("sha256="):
        return False
    # Compared as bytes: compare_digest raises on str with non-ASCII characters, and a header is whatever was sent.
    presented = header.removeprefix("sha256=").strip().lower().encode("utf-8", errors="replace")
    for server_key in (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])):
        secret = _secret_with(trigger, server_key).encode("ascii")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode("ascii")
        if hmac.compare_digest(expected, presented):
            return True
    return False


# --- replays (X-GitHub-Delivery, signed bodies) -------------------------------------------------------------------


def delivery_fingerprints(delivery_id: str | None, signed_body: bytes | None) -> list[str]:
    """What identifies a delivery: GitHub's delivery id when sent, and the signed body's digest when the request was
    signed (the id is not covered by the signature, so a replay with a made-up id still repeats the signed body)."""
    found = []
    if delivery_id:
        found.append("id:" + hashlib.sha256(delivery_id.encode("utf-8", errors="replace")).hexdigest())
    if signed_body is not None:
        found.append("body:" + hashlib.sha256(signed_body).hexdigest())
    return found


def first_receipt(trigger: WebhookTrigger, delivery_id: str | None, signed_body: bytes | None) -> bool:
    """Record the delivery for the trigger; False when it was recorded before (a replay, or GitHub redelivering).
    Call it inside the transaction that records the message, so a failure there forgets the delivery too."""
    fingerprints = delivery_fingerprints(delivery_id, signed_body)
    if not fingerprints:
        return True
    try:
        # A savepoint: the unique constraint, not a read first, settles two copies arriving together.
        with transaction.atomic():
            ReceivedDelivery.objects.bulk_create(
                ReceivedDelivery(trigger=trigger, fingerprint=fingerprint) for fingerprint in fingerprints
            )
    except IntegrityError:
        return False
    return True


def prune_received_deliveries() -> int:
    """Forget deliveries older than TRIGGER_DELIVERY_RETENTION_SECONDS; returns how many."""
    cutoff = timezone.now() - timedelta(seconds=settings.TRIGGER_DELIVERY_RETENTION_SECONDS)
    return delete_in_batches(ReceivedDelivery.objects.filter(received_at__lt=cutoff), oldest_first=("received_at",))


# --- what a firing says --------------------------------------------------------------------------------------------


def message_text(trigger: WebhookTrigger, payload: object, github_event: str | None = None) -> str:
    """The instruction a firing puts in the thread: the action, then which trigger fired and, for a sender we
    recognise, one line on what happened. The payload itself travels as the message's context."""
    summary = summarise(payload, github_event)
    fired = f"(Webhook trigger “{trigger.condition}” fired" + (f": {summary})" if summary else ")")
    return f"{trigger.action}\n{fired}"
