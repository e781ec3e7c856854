"""The body rules of the two endpoints (docs/design.md#the-two-endpoints)."""

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from django.conf import settings

from ingestion.exceptions import InvalidBody

_EXAMPLE = 'for example {"message": "Remind me to call Sam at 5pm"}'


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _check_storable(value: Any, depth: int, max_depth: int, path: Callable[[], str]) -> None:
    """Refuse what PostgreSQL's jsonb (and any text column) cannot hold: NUL characters and lone surrogates.
    ``path`` names the value for the error message; it is only built when there is an error to report."""
    if depth > max_depth:
        raise InvalidBody(f"The body is nested more than {max_depth} levels deep.")
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, dict):
        for name, member in value.items():
            _check_text(name, path)
            _check_storable(member, depth + 1, max_depth, partial(_member_path, path, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_storable(item, depth + 1, max_depth, partial(_item_path, path, index))


def _member_path(parent: Callable[[], str], name: str) -> str:
    above = parent()
    return f"{above}.{name}" if len(above) < 200 else above


def _item_path(parent: Callable[[], str], index: int) -> str:
    above = parent()
    return f"{above}[{index}]" if len(above) < 200 else above


def _root() -> str:
    return "$"


def check_storable(body: Any) -> None:
    """Refuse a parsed body that the database cannot store (also for bodies that are not messages)."""
    max_depth = settings.INGEST_MAX_JSON_DEPTH
    if _needs_a_closer_look(body, 1, max_depth):
        _check_storable(body, 1, max_depth, _root)


def _needs_a_closer_look(value: Any, depth: int, max_depth: int) -> bool:
    """Whether ``_check_storable`` would refuse ``value``: the same rules in one quick pass that builds no path and
    calls nothing per string, for the accept path, where nearly every body is fine. On True the full pass runs and
    names what it found."""
    if depth > max_depth:
        return True
    if isinstance(value, str):
        return "\x00" in value or not (value.isascii() or _encodes(value))
    members: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        members = value.items()
    elif isinstance(value, list):
        members = enumerate(value)
    else:
        return False
    if value and depth + 1 > max_depth:  # its members are one level deeper
        return True
    for name, member in members:
        if isinstance(name, str) and ("\x00" in name or not (name.isascii() or _encodes(name))):
            return True
        if isinstance(member, str):
            if "\x00" in member or not (member.isascii() or _encodes(member)):
                return True
        elif isinstance(member, dict | list) and _needs_a_closer_look(member, depth + 1, max_depth):
            return True
    return False


def _encodes(text: str) -> bool:
    """Whether the text is valid UTF-8 once encoded: False for a lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(text: str, path: Callable[[], str]) -> None:
    if "\x00" in text:
        raise InvalidBody(f"The value at {path()} contains a NUL character (\\u0000), which cannot be stored.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidBody(
            f"The value at {path()} contains an unpaired UTF-16 surrogate, which cannot be stored."
        ) from None


def _check_message(body: dict[str, Any]) -> str:
    message = body["message"]
    if not isinstance(message, str):
        raise InvalidBody(f"The member 'message' must be a string, not {_kind(message)}; {_EXAMPLE}.")
    if not message.strip():
        raise InvalidBody(f"The member 'message' is blank; write the instruction for the assistant, {_EXAMPLE}.")
    return message


def _require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidBody(f"The body must be a JSON object, not {_kind(body)}; {_EXAMPLE}.")
    check_storable(body)
    return body


def current_endpoint_text(body: Any) -> str:
    """The current endpoint forwards any non-empty object; 'message', when present, must be a non-blank string."""
    body = _require_object(body)
    if not body:
        raise InvalidBody(f"The body is an empty object; send a 'message' or the payload to forward, {_EXAMPLE}.")
    return _check_message(body) if "message" in body else ""


def legacy_endpoint_text(body: Any) -> str:
    """The legacy endpoint needs a non-blank string 'message'."""
    body = _require_object(body)
    if "message" not in body:
        raise InvalidBody(f"The member 'message' is required; {_EXAMPLE}.")
    return _check_message(body)


def trigger_payload(body: Any) -> dict[str, Any]:
    """A webhook trigger takes any non-empty JSON object, forwarded whole as the message's context (its text is the
    trigger's action, so no member is required)."""
    body = _require_object(body)
    if not body:
        raise InvalidBody('The body is an empty object; send the event\'s data, for example {"order": 1042}.')
    return body
