"""Linking an address to a person, with proof that it is theirs (docs/design.md#channels).

Phone channels (SMS, WhatsApp, iMessage): a 6-digit code goes out on that channel to the number; typing it back in
the console links the number. Telegram: a one-time deep link ``t.me/<bot>?start=<token>``; the bot's ``/start
<token>`` update links the chat it came from. Either proof lives LINK_CODE_TTL_SECONDS, is stored only as a digest
(codes keyed with SECRET_KEY, since a million 6-digit codes are quickly tried offline; tokens, 192 random bits, as
plain SHA-256), is used once, and allows LINK_CODE_MAX_TRIES wrong entries. A person may ask for
LINK_CODE_RATE_LIMIT codes, an address receive LINK_CODE_ADDRESS_RATE_LIMIT, per window.

An address belongs to one person: the unique constraint on LinkedAddress decides, and a person learns that a number
is someone else's only after proving it is theirs (typing the code sent to it), so the page tells no stranger who
has linked what.

The profile's ``phone_number`` and ``channel`` (what the legacy endpoint reports, typed at sign-up) stay the
person's own statement; linking never overwrites them, except that the first phone number linked fills an empty
``phone_number`` (with its channel). Outbound routing reads linked addresses, with ``Profile.channel`` as the
preferred channel when the person has not written from any."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from accounts.models import Channel as ProfileChannel
from accounts.models import Profile
from channels.adapters.base import PHONE_CHANNELS, Channel
from channels.models import LinkCode, LinkedAddress
from ops.limits import parse_rate

CODE_DIGITS = 6
_TOKEN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def code_lifetime() -> str:
    """How long a code works, in words, from the one setting: the text that carries the code and the page that asks
    for it say the same (the text once worked it out from the row's two stamps and said 9 minutes for 10)."""
    minutes = max(1, round(settings.LINK_CODE_TTL_SECONDS / 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


class LinkRefused(Exception):
    """The person may not have a code now; the text says why and what to do."""


@dataclass(frozen=True)
class LinkResult:
    outcome: str  # linked | already_linked | taken | wrong_code | expired | too_many_tries | link_refused
    text: str
    linked: LinkedAddress | None = None


def _code_digest(channel: str, address: str, code: str) -> str:
    return salted_hmac("channels.link-code", f"{channel}:{address}:{code}", algorithm="sha256").hexdigest()


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _check_limits(user: User, channel: str, address: str) -> None:
    now = timezone.now()
    count, window = parse_rate(settings.LINK_CODE_RATE_LIMIT)
    if LinkCode.objects.filter(user=user, created_at__gt=now - timedelta(seconds=window)).count() >= count:
        raise LinkRefused("You asked for several codes in a short time. Wait a while, then ask again.")
    if address:
        count, window = parse_rate(settings.LINK_CODE_ADDRESS_RATE_LIMIT)
        recent = LinkCode.objects.filter(
            channel=channel, address=address, created_at__gt=now - timedelta(seconds=window)
        )
        if recent.count() >= count:
            raise LinkRefused("Several codes went to this number in a short time. Wait a while, then ask again.")


def new_phone_code(user: User, channel: str, address: str) -> tuple[LinkCode, str]:
    """A fresh code for ``address`` on ``channel`` (a person's earlier pending codes are void): the row and the code,
    which the caller sends and then forgets."""
    if channel not in PHONE_CHANNELS:
        raise LinkRefused("Choose SMS, WhatsApp or iMessage for a phone number.")
    if LinkedAddress.objects.filter(user=user, channel=channel, address=address).exists():
        raise LinkRefused("This number is already linked on that channel.")
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()  # one request of a person's at a time
        _check_limits(user, channel, address)
        now = timezone.now()
        LinkCode.objects.filter(user=user, used_at=None, expires_at__gt=now).exclude(channel=Channel.TELEGRAM).update(
            expires_at=now
        )
        code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
        row = LinkCode.objects.create(
            user=user,
            channel=channel,
            address=address,
            code_digest=_code_digest(channel, address, code),
            expires_at=now + timedelta(seconds=settings.LINK_CODE_TTL_SECONDS),
        )
    return row, code


def void(code: LinkCode) -> None:
    """A code that could not be sent: it does not count as pending (it still counts against the limits)."""
    LinkCode.objects.filter(pk=code.pk).update(expires_at=timezone.now())


def pending_phone_code(user: User) -> LinkCode | None:
    return (
        LinkCode.objects.filter(user=user, used_at=None, expires_at__gt=timezone.now())
        .exclude(channel=Channel.TELEGRAM)
        .order_by("-created_at")
        .first()
    )


def confirm_phone_code(user: User, typed: str) -> LinkResult:
    """Check ``typed`` against the person's pending code, and link its number when it matches."""
    typed = "".join(typed.split())
    with transaction.atomic():
        code = (
            LinkCode.objects.select_for_update()
            .filter(user=user, used_at=None)
            .exclude(channel=Channel.TELEGRAM)
            .order_by("-created_at")
            .first()
        )
        if code is None or code.expires_at <= timezone.now():
            return LinkResult("expired", "That code has expired or was already used. Ask for a new one.")
        if code.tries >= settings.LINK_CODE_MAX_TRIES:
            return LinkResult("too_many_tries", "Too many wrong codes. Ask for a new one.")
        if not (
            typed.isdigit() and constant_time_compare(_code_digest(code.channel, code.address, typed), code.code_digest)
        ):
            code.tries += 1
            code.save(update_fields=["tries"])
            left = settings.LINK_CODE_MAX_TRIES - code.tries
            if left <= 0:
                return LinkResult("too_many_tries", "That code is wrong, and it was the last try. Ask for a new one.")
            return LinkResult("wrong_code", f"That code is wrong. {left} {'try' if left == 1 else 'tries'} left.")
        code.used_at = timezone.now()
        code.save(update_fields=["used_at"])
        result = _link(user, code.channel, code.address)
        if result.outcome == "linked":
            _fill_empty_profile(user, code.channel, code.address)
        return result


def new_telegram_token(user: User) -> str:
    """A one-time token for ``t.me/<bot>?start=<token>``; earlier unused ones are void."""
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()
        _check_limits(user, Channel.TELEGRAM, "")
        now = timezone.now()
        LinkCode.objects.filter(user=user, channel=Channel.TELEGRAM, used_at=None, expires_at__gt=now).update(
            expires_at=now
        )
        token = secrets.token_urlsafe(24)  # 32 characters of A-Z a-z 0-9 _ -: what Telegram's start parameter takes
        LinkCode.objects.create(
            user=user,
            channel=Channel.TELEGRAM,
            code_digest=_token_digest(token),
            expires_at=now + timedelta(seconds=settings.LINK_CODE_TTL_SECONDS),
        )
    return token


def link_telegram(token: str, chat_id: str) -> LinkResult:
    """The bot received ``/start <token>`` from ``chat_id``: link the chat to whoever made the token."""
    if not 1 <= len(token) <= 64 or not set(token) <= _TOKEN_CHARACTERS:
        return LinkResult("expired", "This link is not valid. Make a new one in your assistant's Settings → Channels.")
    with transaction.atomic():
        code = (
            LinkCode.objects.select_for_update()
            .select_related("user")
            .filter(channel=Channel.TELEGRAM, code_digest=_token_digest(token), used_at=None)
            .first()
        )
        if code is None or code.expires_at <= timezone.now() or not code.user.is_active:
            return LinkResult(
                "expired", "This link has expired or was already used. Make a new one in Settings → Channels."
            )
        code.used_at = timezone.now()
        code.address = chat_id
        code.save(update_fields=["used_at", "address"])
        return _link(code.user, Channel.TELEGRAM, chat_id)


def _link(user: User, channel: str, address: str) -> LinkResult:
    try:
        with transaction.atomic():
            linked = LinkedAddress.objects.create(user=user, channel=channel, address=address)
    except IntegrityError:
        holder = (
            LinkedAddress.objects.filter(channel=channel, address=address).values_list("user_id", flat=True).first()
        )
        if holder == user.pk:
            return LinkResult("already_linked", "This is already linked to your assistant.")
        return LinkResult(
            "taken", "This is linked to another account. Unlink it there first (Settings → Channels), then try again."
        )
    return LinkResult("linked", "Linked: what you send here now reaches your assistant.", linked)


def _fill_empty_profile(user: User, channel: str, address: str) -> None:
    """The first number a person proves fills an empty profile number (what the legacy endpoint reports)."""
    if channel in ProfileChannel.values:
        Profile.objects.filter(user=user, phone_number="").update(phone_number=address, channel=channel)


def unlink(user: User, linked_id: int) -> bool:
    """Remove one of the person's linked addresses; from the next message on it is an unknown sender."""
    deleted, _ = LinkedAddress.objects.filter(user=user, pk=linked_id).delete()
    return deleted > 0


def prune(now: datetime | None = None) -> int:
    """Delete codes and links that expired more than a day ago (used or not): nothing reads them any more."""
    cutoff = (now or timezone.now()) - timedelta(days=1)
    deleted, _ = LinkCode.objects.filter(expires_at__lt=cutoff).delete()
    return deleted
