"""Reading a provider's JSON callback defensively: the signature proves who sent it, not that its shape is what the
documentation promises, and a surprise must be a clear 400 or a skipped item, never a 500."""

import json
from typing import Any

from django.http import HttpRequest

from channels.adapters.base import BadRequest


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object (read once per request: the views ask for messages and then for statuses)."""
    cached = getattr(request, "_channel_payload", None)
    if cached is None:
        try:
            cached = json.loads(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadRequest("The body is not UTF-8.") from None
        except ValueError:
            raise BadRequest("The body is not JSON.", "invalid_json") from None
        if not isinstance(cached, dict):
            raise BadRequest("The body is not a JSON object.")
        request._channel_payload = cached  # type: ignore[attr-defined]
    return cached


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""
