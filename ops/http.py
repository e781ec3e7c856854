"""Facts about a request or response that the operator's middleware reads and the API writes: kept here, at the
ground floor, so that ops imports no app."""

from typing import Any

# Set on a response that replays an earlier one for the same Idempotency-Key (ingestion/idempotency.py): the access
# log does not count such a response as a newly accepted message.
REPLAYED_HEADER = "Idempotent-Replayed"


def declared_length(request: Any) -> int | None:
    """The request's Content-Length, or None when there is none or it is not a number (a Django or DRF request)."""
    if request is None:
        return None
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
