"""The device authorization grant (RFC 8628) behind `poke login`: start, look up by user code, approve or deny,
and the polls that collect the token once. Every entry point (the API, the /device page, the admin) uses these."""

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from devices.models import DeviceAuthorization, Status
from keys import scopes, tokens
from keys.services import KeyLimitReached, create_key
from ops.visible import without_hidden

# pdc_ + 32 base62 characters (190 bits, RFC 8628 asks for enough entropy that guessing is hopeless) + a checksum.
DEVICE_CODE_PREFIX = "pdc_"
# RFC 8628 §6.1: consonants only (no vowels: no words; no 0/O, 1/I), upper case, 8 characters: 20^8 ≈ 2.6·10^10.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
LIFETIME = timedelta(minutes=10)
LOGIN_ACTOR = "a CLI log-in (poke login) you approved on /device"
POLL_INTERVAL_SECONDS = 2  # what the poke CLI uses; RFC 8628's default is 5


@dataclass(frozen=True)
class Poll:
    """What a poll finds: status is pending, authenticated (with the token, this once), denied, expired, used,
    full (the account may hold no more keys), slow_down (too soon after the last poll) or unknown."""

    status: str
    token: str | None = None
    authorization: DeviceAuthorization | None = None


def _digest(device_code: str) -> str:
    return hashlib.sha256(device_code.encode("utf-8")).hexdigest()


def normalise_user_code(typed: str) -> str | None:
    """The user code as stored, from what a person typed (any case, dashes and spaces anywhere), or None when it
    cannot be one."""
    code = re.sub(r"[\s\-]", "", typed).upper()[: USER_CODE_LENGTH + 1]
    if len(code) != USER_CODE_LENGTH or any(ch not in USER_CODE_ALPHABET for ch in code):
        return None
    return code


def start(client_name: str, client_address: str) -> tuple[DeviceAuthorization, str]:
    """A new log-in request; returns it with the device code (the CLI's secret, kept nowhere)."""
    device_code = tokens.generate_checked(DEVICE_CODE_PREFIX)
    now = timezone.now()
    for attempt in range(5):
        try:
            with transaction.atomic():
                authorization = DeviceAuthorization.objects.create(
                    device_code_digest=_digest(device_code),
                    user_code="".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH)),
                    client_name=client_name[:200],
                    client_address=client_address[:45],
                    created_at=now,
                    expires_at=now + LIFETIME,
                )
            return authorization, device_code
        except IntegrityError:  # a user code still in the table (1 in 10^10 per row): draw another
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def pending_by_user_code(typed: str) -> DeviceAuthorization | None:
    """The request a person means by the code they typed: pending and not expired, else None."""
    code = normalise_user_code(typed)
    if code is None:
        return None
    return DeviceAuthorization.objects.filter(
        user_code=code, status=Status.PENDING, expires_at__gt=timezone.now()
    ).first()


def _decide(authorization: DeviceAuthorization, user: User, status: Status) -> bool:
    now = timezone.now()
    decided = DeviceAuthorization.objects.filter(pk=authorization.pk, status=Status.PENDING, expires_at__gt=now).update(
        status=status, decided_by=user, decided_at=now
    )
    if decided:
        authorization.status, authorization.decided_by, authorization.decided_at = status, user, now
    return bool(decided)


def approve(authorization: DeviceAuthorization, user: User) -> bool:
    """Approve for user; False when it is no longer pending (decided already, or expired). One approval only."""
    return _decide(authorization, user, Status.APPROVED)


def deny(authorization: DeviceAuthorization, user: User) -> bool:
    return _decide(authorization, user, Status.DENIED)


def key_name(authorization: DeviceAuthorization) -> str:
    """The issued key's name: the device and the date, so that it can be told apart (and revoked) on API Keys."""
    agent = without_hidden(authorization.client_name).strip()  # a client's name is not typed by the person
    if agent.lower().startswith(("node", "undici")):
        device = "poke CLI (Node.js)"
    elif agent:
        device = agent.split()[0][:60]
    else:
        device = "CLI"
    when = (authorization.decided_at or timezone.now()).strftime("%Y-%m-%d")
    return f"{device} log-in · {when}"


def poll(device_code: str) -> Poll:
    """What the CLI learns on a poll. The first poll after approval creates the key and carries its token; the
    request is then used up, so the token is handed out exactly once."""
    if not tokens.is_checked(device_code, DEVICE_CODE_PREFIX):
        return Poll("unknown")
    authorization = DeviceAuthorization.objects.filter(device_code_digest=_digest(device_code)).first()
    if authorization is None:
        return Poll("unknown")
    if authorization.status == Status.CONSUMED:
        return Poll("used", authorization=authorization)
    if authorization.status == Status.DENIED:
        return Poll("denied", authorization=authorization)
    if authorization.is_expired:
        return Poll("expired", authorization=authorization)
    if not _paced(authorization):
        return Poll("slow_down", authorization=authorization)
    if authorization.status == Status.PENDING:
        return Poll("pending", authorization=authorization)
    try:
        return _collect(device_code, authorization)
    except KeyLimitReached:
        # The account holds as many keys as it may (MAX_ACTIVE_KEYS_PER_ACCOUNT): nothing was collected, and the
        # request stays approved, so a poll after a key is revoked gets its token.
        return Poll("full", authorization=authorization)


def _paced(authorization: DeviceAuthorization) -> bool:
    """Note this poll, unless it comes sooner than CLI_AUTH_POLL_MIN_SECONDS after the last one answered: then
    False (slow_down). One conditional statement, so polls racing each other are paced too."""
    gap = settings.CLI_AUTH_POLL_MIN_SECONDS
    if gap <= 0:
        return True
    now = timezone.now()
    return bool(
        DeviceAuthorization.objects.filter(pk=authorization.pk)
        .filter(Q(last_polled_at__isnull=True) | Q(last_polled_at__lte=now - timedelta(seconds=gap)))
        .update(last_polled_at=now)
    )


def _collect(device_code: str, authorization: DeviceAuthorization) -> Poll:
    with transaction.atomic():
        now = timezone.now()
        collected = DeviceAuthorization.objects.filter(
            pk=authorization.pk, status=Status.APPROVED, expires_at__gt=now
        ).update(status=Status.CONSUMED, collected_at=now)
        if not collected:  # another poll collected it a moment ago (or it just expired)
            return poll(device_code)
        assert authorization.decided_by is not None
        key, plaintext = create_key(
            authorization.decided_by, key_name(authorization), scopes=scopes.CLI, by=LOGIN_ACTOR
        )
        DeviceAuthorization.objects.filter(pk=authorization.pk).update(api_key=key)
    authorization.status, authorization.api_key = Status.CONSUMED, key
    return Poll("authenticated", token=plaintext, authorization=authorization)


def prune(older_than: timedelta = timedelta(days=1)) -> int:
    """Delete requests that ended (or expired) long ago; the keys they issued stay."""
    return DeviceAuthorization.objects.filter(expires_at__lt=timezone.now() - older_than).delete()[0]
