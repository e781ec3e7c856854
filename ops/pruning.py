"""Deleting what is kept for a while, in batches (docs/reference/settings.md): each batch is one short
transaction of at most PRUNE_BATCH_ROWS rows, chosen oldest first through an index, so a prune never holds a lock
long enough to stall a request, and a backlog of any size shrinks by a batch at a time. A run stops after
PRUNE_RUN_SECONDS (under the housekeeping's statement limit), one batch at the least, and the next run picks up where
it stopped: the rows left are still the oldest that match."""

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet


def delete_in_batches(
    matching: QuerySet[Any], *, oldest_first: tuple[str, ...], before_delete: Callable[[list[int]], None] | None = None
) -> int:
    """Delete the rows of ``matching``, PRUNE_BATCH_ROWS at a time in ``oldest_first`` order; returns how many.
    ``before_delete`` gets each batch's primary keys inside its transaction (to keep what must outlive the rows)."""
    deleted = 0
    stop_at = time.monotonic() + settings.PRUNE_RUN_SECONDS
    while ids := list(matching.order_by(*oldest_first).values_list("pk", flat=True)[: settings.PRUNE_BATCH_ROWS]):
        with transaction.atomic():
            if before_delete is not None:
                before_delete(ids)
            matching.model.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
        if len(ids) < settings.PRUNE_BATCH_ROWS or time.monotonic() >= stop_at:
            break  # at least one batch a run, so that a run always gets on
    return deleted
