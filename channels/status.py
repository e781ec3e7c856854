"""Where the delivery statuses that providers report go (docs/design.md#channels: "A provider's delivery statuses are
shown on the message"). The callback views parse them (each adapter's ``parse_statuses``) and hand them here;
recording them on the outbox's rows is the outbox's work (channels/outbound/statuses.py)."""

from collections.abc import Sequence

from channels.adapters.base import StatusUpdate
from channels.outbound import statuses


def record(updates: Sequence[StatusUpdate]) -> None:
    """Record each update on the send it is about. An id that matches no send is ignored (a status for a message
    this server did not send, or whose row is gone): the provider is answered 200 either way, or it retries."""
    statuses.record(updates)
