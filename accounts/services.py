from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from accounts.models import Profile


def _normalized(email: str) -> str:
    return get_user_model().objects.normalize_email(email.strip())


def _username_for(email: str) -> str:
    # Addresses are matched without regard to case (login, sign-up checks), so the username, whose unique index is
    # what settles two sign-ups racing for one address, is the address in lower case.
    return email.lower()


def get_or_create_user(email: str) -> tuple[User, bool]:
    """The account for an email address, created without a usable password."""
    user = find_user_by_email(email)
    if user is not None:
        return user, False
    email = _normalized(email)
    return get_user_model().objects.create_user(username=_username_for(email), email=email), True


@transaction.atomic
def update_contact(
    user: User, *, phone_number: str | None = None, channel: str | None = None, time_zone: str | None = None
) -> Profile:
    profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
    for field, value in (("phone_number", phone_number), ("channel", channel), ("time_zone", time_zone)):
        if value is not None:  # None: keep the one set
            setattr(profile, field, value)
    profile.full_clean()
    profile.save()
    return profile


class EmailTaken(Exception):
    """Someone already signed up with this email address."""


def find_user_by_email(email: str) -> User | None:
    return get_user_model().objects.filter(email__iexact=email.strip()).first()


@transaction.atomic
def sign_up(*, email: str, password: str, phone_number: str, channel: str, password_is_hashed: bool = False) -> User:
    """A new account with a usable password (or its hash, made earlier: a sign-up confirmed by email) and its
    contact details."""
    email = _normalized(email)
    if find_user_by_email(email) is not None:
        raise EmailTaken(email)
    try:
        # A savepoint, so that losing a race for the same email leaves the outer transaction usable.
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=_username_for(email), email=email, password=None if password_is_hashed else password
            )
            if password_is_hashed:
                user.password = password
                user.save(update_fields=["password"])
    except IntegrityError:
        raise EmailTaken(email) from None
    update_contact(user, phone_number=phone_number, channel=channel)
    return user


def profile_of(user: User) -> Profile:
    return Profile.objects.get_or_create(user=user)[0]


def lock_account(owner: User) -> None:
    """Inside a transaction, lock the owner's row until it ends: it orders two creations for one account
    (PostgreSQL), so that both cannot count the same rows and pass a per-account cap together (keys, webhook
    triggers, MCP connections). SQLite runs one writing transaction at a time anyway."""
    get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True).first()


def lock_room(owner: User, active: QuerySet[Any], limit: int, refused: Callable[[int], Exception]) -> None:
    """Inside a transaction, before creating one more of the owner's rows under a per-account cap: lock the account
    (lock_account) and raise ``refused(limit)`` when ``active``, the owner's rows the cap counts, holds ``limit``."""
    lock_account(owner)
    if active.count() >= limit:
        raise refused(limit)
