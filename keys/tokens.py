"""The two key formats, and how a presented key is recognised without touching the database.

V1 (legacy): ``pk_`` + 40 base62 characters.
V2 (current): ``psk_`` + 32 base62 characters (190 random bits) + a 6-character base62 CRC32 of everything before
it. The checksum lets us refuse a mistyped or truncated key before any query, and the fixed shape
(``psk_[0-9A-Za-z]{38}``) lets secret scanners recognise a leaked key.
"""

import hashlib
import re
import secrets
import string
import zlib
from dataclasses import dataclass

from keys.models import Generation

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase

V1_PREFIX = "pk_"
V1_BODY_LENGTH = 40
V2_PREFIX = "psk_"
V2_RANDOM_LENGTH = 32
V2_CHECKSUM_LENGTH = 6

_V1_PATTERN = re.compile(rf"^{V1_PREFIX}[0-9A-Za-z]{{{V1_BODY_LENGTH}}}$")
_V2_PATTERN = re.compile(rf"^{V2_PREFIX}[0-9A-Za-z]{{{V2_RANDOM_LENGTH + V2_CHECKSUM_LENGTH}}}$")


@dataclass(frozen=True, slots=True)
class PresentedKey:
    generation: Generation
    digest: str


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, remainder = divmod(number, 62)
        digits.append(BASE62[remainder])
    return "".join(reversed(digits))


def _checksum(text: str) -> str:
    return _base62(zlib.crc32(text.encode("ascii")), V2_CHECKSUM_LENGTH)


def _random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


def generate(generation: Generation) -> str:
    if generation == Generation.V1:
        return V1_PREFIX + _random_base62(V1_BODY_LENGTH)
    head = V2_PREFIX + _random_base62(V2_RANDOM_LENGTH)
    return head + _checksum(head)


def digest(plaintext: str) -> str:
    """What we store and look keys up by: SHA-256 of the whole key (keys are random, so no salt or slow hash)."""
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def hint(plaintext: str) -> str:
    """A display hint that identifies a key to its owner without revealing it: prefix and last four characters."""
    prefix = V2_PREFIX if plaintext.startswith(V2_PREFIX) else V1_PREFIX
    return f"{prefix}…{plaintext[-4:]}"


def recognise(plaintext: str) -> PresentedKey | None:
    """The generation and digest of a well-formed key, or None for anything that cannot be one of ours."""
    if _V2_PATTERN.match(plaintext):
        head, check = plaintext[:-V2_CHECKSUM_LENGTH], plaintext[-V2_CHECKSUM_LENGTH:]
        if not secrets.compare_digest(_checksum(head), check):
            return None
        return PresentedKey(Generation.V2, digest(plaintext))
    if _V1_PATTERN.match(plaintext):
        return PresentedKey(Generation.V1, digest(plaintext))
    return None


# Other secrets of the same shape as a V2 key (a webhook trigger's token): prefix + 32 base62 characters + a
# 6-character checksum, so that they too are refused on a typo before any query and are recognisable to scanners.


def generate_checked(prefix: str) -> str:
    """prefix + 32 random base62 characters (190 bits) + the base62 CRC32 of everything before it."""
    head = prefix + _random_base62(V2_RANDOM_LENGTH)
    return head + _checksum(head)


def is_checked(plaintext: str, prefix: str) -> bool:
    """Whether plaintext has the shape generate_checked(prefix) gives and its checksum holds."""
    body = plaintext[len(prefix) :]
    if not plaintext.startswith(prefix) or len(body) != V2_RANDOM_LENGTH + V2_CHECKSUM_LENGTH:
        return False
    if not all(ch in BASE62 for ch in body):
        return False
    head, check = plaintext[:-V2_CHECKSUM_LENGTH], plaintext[-V2_CHECKSUM_LENGTH:]
    return secrets.compare_digest(_checksum(head), check)
