"""The MCP servers' API keys, encrypted at rest with Fernet (the `cryptography` package).

MCP_ENCRYPTION_KEYS is a comma-separated list of Fernet keys, newest first: the first encrypts, any of them
decrypts (MultiFernet). To rotate: put a new key in front, restart, run `manage.py rotatemcpkeys` (re-encrypts
every stored key with the first key), then drop the old key. Without the setting the key is derived from
SECRET_KEY, so rotating SECRET_KEY then means rotating this too (docs/howto/backups-and-upgrades.md#rotate-secret_key).
"""

import base64
import hashlib
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class UnreadableSecret(Exception):
    """A stored key that none of the configured keys decrypts (the key it was written with was dropped)."""


@cache
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if not keys:
        derived = hashlib.sha256(b"mcp-connection-keys:" + secret_key.encode()).digest()
        keys = (base64.urlsafe_b64encode(derived).decode(),)
    try:
        return MultiFernet([Fernet(key.strip()) for key in keys])
    except ValueError:
        raise ImproperlyConfigured(
            "MCP_ENCRYPTION_KEYS: each key must be 32 url-safe base64-encoded bytes "
            "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')."
        ) from None


def _current() -> MultiFernet:
    return _fernet(tuple(settings.MCP_ENCRYPTION_KEYS), settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    return _current().encrypt(plaintext.encode()).decode() if plaintext else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        raise UnreadableSecret(
            "The connection's API key cannot be decrypted with MCP_ENCRYPTION_KEYS; add the key again."
        ) from None


def rotate(token: str) -> str:
    """The same secret, encrypted with the first (newest) key."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise UnreadableSecret("A stored API key cannot be decrypted with any of MCP_ENCRYPTION_KEYS.") from None
