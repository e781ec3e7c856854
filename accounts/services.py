from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from accounts.models import Profile


def get_or_create_user(email: str) -> tuple[User, bool]:
    """The account for an email address (the email is also the username), created without a usable password."""
    User = get_user_model()
    email = User.objects.normalize_email(email.strip())
    user = User.objects.filter(email__iexact=email).first()
    if user is not None:
        return user, False
    user = User.objects.create_user(username=email, email=email)
    return user, True


@transaction.atomic
def update_contact(user: User, *, phone_number: str | None = None, channel: str | None = None) -> Profile:
    profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
    if phone_number is not None:
        profile.phone_number = phone_number
    if channel is not None:
        profile.channel = channel
    profile.full_clean()
    profile.save()
    return profile
