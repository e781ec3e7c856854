"""The delivery queue, as the workers see it: claimed attempts with everything they need to send.

A delivery is ready when it is queued and due (no ``next_attempt_at``, or that time has come), or when it is being
attempted under a lease that has expired (its worker died: kill -9, out of memory, a lost machine) and its takeovers
are not used up. It is claimable when it is ready and first in its thread: no earlier delivery of the same thread is
still pending (queued or being attempted) and no later one is being attempted under a live lease. So a thread's
messages reach the assistant one at a time, in the order they were accepted, and different threads run in parallel.

A retry waiting for its backoff keeps its place: the thread's later messages wait behind it until it is delivered
or fails for good (as FIFO queues with message groups do). The assistant never sees a conversation out of order.

The claim is delivery/lifecycle.py's (on PostgreSQL one statement that also returns the message, its key and the
recent thread); this module turns its rows into the assistant's requests, read by the ORM on SQLite.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from assistant.conversation import AssistantRequest, KeyInfo, ThreadEntry, build_request
from conversations.models import Message
from delivery import lifecycle
from delivery.lifecycle import Held


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed attempt: the delivery, the attempt number (the claim's token) and what to send."""

    delivery_id: int
    attempt: int
    backend: str
    request: AssistantRequest

    @property
    def held(self) -> Held:
        return Held(self.delivery_id, self.attempt)

    @property
    def row_id(self) -> int:  # the queue worker's name for it (delivery/queue_worker.py)
        return self.delivery_id


def claim(limit: int, *, lease_seconds: float | None = None) -> list[Claim]:
    """Claim up to ``limit`` claimable deliveries, each under a lease of ``lease_seconds`` (by default
    DELIVERY_LEASE_SECONDS, which the claimer renews)."""
    if connection.vendor == "postgresql":
        return [_claim_of_row(row) for row in lifecycle.claim(limit, lease_seconds=lease_seconds)]
    with transaction.atomic():  # the claim and the reads together
        rows = lifecycle.claim(limit, lease_seconds=lease_seconds)
        messages = Message.objects.select_related("conversation", "api_key")
        return [
            Claim(delivery_id, attempt, backend, build_request(messages.get(pk=message_id), attempt))
            for delivery_id, message_id, attempt, backend in rows
        ]


def _claim_of_row(row: Sequence[Any]) -> Claim:
    (delivery_id, attempt, backend, public_id, text, context, source, created_at, user_id) = row[:9]
    key_id, key_name, key_hint, ids, roles, texts, times, replied_by = row[9:]
    thread = [
        ThreadEntry(id=i, role=r, text=t, created_at=at.isoformat(), replied_by=b)
        for i, r, t, at, b in zip(ids, roles, texts, times, replied_by, strict=True)
    ]
    request = AssistantRequest(
        message_id=public_id,
        text=text,
        context=None if context is None else json.loads(context),
        source=source,
        created_at=created_at.isoformat(),
        user_id=user_id,
        key=None if key_id is None else KeyInfo(id=key_id, name=key_name, hint=key_hint),
        thread=thread,
        attempt=attempt,
    )
    return Claim(delivery_id, attempt, backend, request)
