"""The body rules of the two endpoints (DESIGN.md, "The public API")."""

from typing import Any

from django.conf import settings

from ingestion.exceptions import InvalidBody

_EXAMPLE = 'for example {"message": "Remind me to call Sam at 5pm"}'


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _check_storable(value: Any, depth: int, path: str) -> None:
    """Refuse what PostgreSQL's jsonb (and any text column) cannot hold: NUL characters and lone surrogates."""
    if depth > settings.INGEST_MAX_JSON_DEPTH:
        raise InvalidBody(f"The body is nested more than {settings.INGEST_MAX_JSON_DEPTH} levels deep.")
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, dict):
        for name, member in value.items():
            _check_text(name, path)
            _check_storable(member, depth + 1, f"{path}.{name}" if len(path) < 200 else path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_storable(item, depth + 1, f"{path}[{index}]" if len(path) < 200 else path)


def check_storable(body: Any) -> None:
    """Refuse a parsed body that the database cannot store (also for bodies that are not messages)."""
    _check_storable(body, 1, "$")


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise InvalidBody(f"The value at {path} contains a NUL character (\\u0000), which cannot be stored.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidBody(
            f"The value at {path} contains an unpaired UTF-16 surrogate, which cannot be stored."
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
    _check_storable(body, 1, "$")
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
