"""Reading a provider's JSON callback defensively: the signature proves who sent it, not that its shape is what the
documentation promises, and a surprise must be a clear 400 or a skipped item, never a 500."""

import json
from typing import Any

from django.http import HttpRequest

from channels.adapters.base import BadRequest


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object (read once per request: the views ask for messages and then for statuses)."""
    cached = request.META.get("channels.payload")  # kept in the request's WSGI environ
    if cached is None:
        try:
            cached = json.loads(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadRequest("The body is not UTF-8.") from None
        except ValueError:
            raise BadRequest("The body is not JSON.", "invalid_json") from None
        except RecursionError:
            raise BadRequest("The body is nested too deeply.") from None
        if not isinstance(cached, dict):
            raise BadRequest("The body is not a JSON object.")
        request.META["channels.payload"] = cached
    return cached


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_reasonable_id(value: str, limit: int) -> bool:
    """An id or address a provider could have sent: printable, not empty, within the column's length. Anything else
    (a NUL, which PostgreSQL cannot store; kilobytes of text) is not looked up or stored."""
    return 0 < len(value) <= limit and value.isprintable()


def storable(value: Any) -> Any:
    """A provider's value as the database can keep it: NUL characters dropped and lone surrogates (JSON's "\\ud800")
    replaced, in every string of it."""
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value
