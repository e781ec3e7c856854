"""Strict helpers for reading settings from the environment (12-factor).

A value that is present but cannot be understood is an error at start-up, not a silent default.
"""

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _parsed[T](name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    """The variable read by ``parse``; ``default`` when it is unset or blank."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}") from None


def env_int(name: str, default: int) -> int:
    return _parsed(name, default, int, "an integer")


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_timestamp(name: str, default: str) -> int:
    """An ISO date (2027-06-30) or date-time as Unix seconds, UTC unless an offset is given; 0 when unset."""
    raw = os.environ.get(name, default).strip()
    if not raw:
        return 0
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an ISO date such as 2027-06-30, got {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


_RATE = re.compile(r"^[1-9][0-9]*/(?:[1-9][0-9]*)?[smhd]$")


def env_rate(name: str, default: str) -> str:
    """A rate in django-ratelimit's syntax: a count, a slash, an optional multiplier and s, m, h or d (60/m, 10/30s)."""
    raw = os.environ.get(name, default).strip()
    if not _RATE.match(raw):
        raise ImproperlyConfigured(f"{name} must be a rate such as 60/m, 1000/h or 10/30s, got {raw!r}")
    return raw


def env_float(name: str, default: float) -> float:
    value = _parsed(name, default, float, "a number")
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise ImproperlyConfigured(f"{name} must be a finite number of zero or more, got {os.environ.get(name)!r}")
    return value


def env_choice(name: str, default: str, choices: list[str]) -> str:
    value = os.environ.get(name, default).strip() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value
