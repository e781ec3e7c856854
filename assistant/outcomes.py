"""What an assistant backend can answer: a reply now, an acceptance (the reply comes later), or a failure."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant answered; the text goes into the user's thread."""

    text: str


@dataclass(frozen=True, slots=True)
class Accepted:
    """The assistant took the message and will answer later (through the callback endpoint)."""


Outcome = Reply | Accepted


def storable_reply(value: Any) -> str | None:
    """The text of a backend's reply if the thread can take it: a non-blank string with no NUL (PostgreSQL refuses
    it) and no lone surrogate (it has no UTF-8); else None."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


class DeliveryFailure(Exception):
    """The attempt failed. The text is kept as the delivery's last error: never put a secret or a URL in it."""


class TransientFailure(DeliveryFailure):
    """Worth another attempt later: a timeout, a refused connection, a 5xx, a 429."""

    def __init__(self, text: str, retry_after: float | None = None) -> None:
        super().__init__(text)
        self.retry_after = retry_after


class PermanentFailure(DeliveryFailure):
    """Retrying cannot help (a 4xx, a malformed reply): the delivery fails now; staff may still retry it."""
