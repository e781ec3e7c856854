"""The code that names one approval request, typed from a phone ("YES K7QZ4MX2") or carried by a button.

A code is eight characters: a *handle* (a letter and a digit, "K7") that no other open request of the same person
has, so that a reply names exactly one request, then a *secret* of six characters that must match that request's.
A guess is never matched against every open request: it names one (or none) by its handle, and hits only if its
secret is that request's, one chance in 30⁶ (7.29e8) whatever else waits. Wrong codes are counted per
person (channels/approvals.py), which bounds the guesses a day; docs/explanation/approval.md has the arithmetic.

The alphabet leaves out what reads alike on a small screen (O beside 0; I and L beside 1; U, read as V), and the
digit in second place keeps a reply made of words ("yes tomorrow") from ever reading as an answer.

A button (Telegram, WhatsApp's Cloud API) carries the handle and a token of 128 bits derived from the code with the
server's secret key: nobody who has not seen the code can make one, and the token is never stored."""

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Collection

from django.conf import settings

LETTERS = "ABCDEFGHJKMNPQRSTVWXYZ"  # 22: no I, L, O, U
DIGITS = "23456789"  # 8: no 0, no 1
ALPHABET = DIGITS + LETTERS  # 30
HANDLE_LENGTH = 2
SECRET_LENGTH = 6  # 30 ** 6: 729,000,000 secrets behind each handle
HANDLES = len(LETTERS) * len(DIGITS)  # 176 requests of one person can be open at once, far above the caps

# A typed code: the shape only (a letter, a digit, six more, maybe split by "-" or a space after four); whether its
# characters are in the alphabet is the lookup's business, so a mistyped "O" is a wrong code, not words for the
# assistant.
TYPED = r"[a-z][0-9][a-z0-9]{2}[- ]?[a-z0-9]{4}"
_TOKEN = 22  # characters of base64url: 132 bits shown, 128 used


def new_code(taken_handles: Collection[str]) -> str:
    """A fresh code whose handle is not among ``taken_handles`` (the person's open and recent requests'); when every
    handle is taken, any handle (the caller makes sure no open request holds it)."""
    free = [letter + digit for letter in LETTERS for digit in DIGITS if letter + digit not in taken_handles]
    handle = secrets.choice(free) if free else secrets.choice(LETTERS) + secrets.choice(DIGITS)
    return handle + "".join(secrets.choice(ALPHABET) for _ in range(SECRET_LENGTH))


def handle_of(code: str) -> str:
    return code[:HANDLE_LENGTH]


def normalized(typed: str) -> str:
    """A typed code as stored: upper case, without its separator."""
    return typed.upper().replace("-", "").replace(" ", "")


def matches(code: str, given: str) -> bool:
    """Whether ``given`` (normalized) is the request's ``code``, in constant time."""
    return bool(code) and hmac.compare_digest(code.encode(), given.encode())


def button_token(code: str) -> str:
    """What a button carries besides the handle: a keyed digest of the code, unguessable without it."""
    digest = hmac.new(settings.SECRET_KEY.encode(), b"approval-button:" + code.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:_TOKEN]


def token_matches(code: str, token: str) -> bool:
    return bool(code) and hmac.compare_digest(button_token(code).encode(), token.encode())


BUTTON_TOKEN = re.compile(rf"[A-Za-z0-9_-]{{{_TOKEN}}}")
