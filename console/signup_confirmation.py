"""Sign-up confirmed by email, so that the sign-up page does not tell whether an address has an account.

Without it, signing up with an address that has an account says so ("already exists"), and anyone can test addresses
one by one. With ``SIGNUP_EMAIL_CONFIRMATION`` (on wherever an SMTP server is configured, EMAIL_HOST), every valid
sign-up gets the same answer, "check your email", after the same work: the password is hashed, the details are kept
in the cache for an hour under a random token's digest, and a task (the worker, with TASK_BACKEND=database) mails the
address either a link that finishes creating the account or, when it already has one, a note saying so with a link
to log in or reset the password. Only whoever reads that inbox learns which.

The token travels in the link's query string (``/signup/confirm/?token=…``), which no log or error report keeps
(the access logs write the path alone; ops/sentry.py drops query strings). Opening the link shows a button; the
account is created by that POST, so a mail scanner that fetches links creates nothing.
"""

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.cache import cache
from django.core.mail import send_mail
from django.tasks import task
from django.template.loader import render_to_string
from django.urls import reverse

from accounts.services import find_user_by_email

_PREFIX = "signup-pending:"


def _cache_key(token: str) -> str:
    return _PREFIX + hashlib.sha256(token.encode()).hexdigest()


def start(*, email: str, password: str, phone_number: str, channel: str, domain: str, use_https: bool) -> None:
    """The same work for every address: keep the details under a new token and enqueue the email."""
    token = secrets.token_urlsafe(32)
    pending = {"email": email, "password": make_password(password), "phone_number": phone_number, "channel": channel}
    cache.set(_cache_key(token), pending, timeout=settings.PASSWORD_RESET_TIMEOUT)
    send_signup_email.enqueue(email, token, domain, use_https)


def pending_of(token: str) -> dict[str, Any] | None:
    return cache.get(_cache_key(token)) if token else None


def consume(token: str) -> dict[str, Any] | None:
    """The details kept for the token, once: a second use finds nothing."""
    key = _cache_key(token)
    pending = cache.get(key)
    if pending is None or not cache.delete(key):
        return None  # unknown, expired, or used by a request a moment ago
    return dict(pending)


@task
def send_signup_email(email: str, token: str, domain: str, use_https: bool) -> None:
    """The link that finishes a sign-up, or, for an address that has an account, a note saying so."""
    base = f"{'https' if use_https else 'http'}://{domain}"
    exists = find_user_by_email(email) is not None
    context = {
        "email": email,
        "confirm_url": f"{base}{reverse('accounts:signup_confirm')}?token={token}",
        "login_url": f"{base}{reverse('accounts:login')}",
        "reset_url": f"{base}{reverse('accounts:password_reset')}",
    }
    template = "accounts/signup_exists_email.txt" if exists else "accounts/signup_email.txt"
    send_mail(
        render_to_string("accounts/signup_subject.txt", {"exists": exists}).strip(),
        render_to_string(template, context),
        None,
        [email],
    )
