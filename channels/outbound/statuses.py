"""A provider's delivery statuses (its callbacks, parsed by the adapter) recorded on the outbox rows they are about.

Callbacks come late, twice and out of order: a status never moves a row back (a "sent" after "delivered" changes
nothing; failed and undelivered are final). A status for a message id we never sent (another system on the same
account, a row deleted with its message, a forged id that passed the signature check because it came from the
provider) changes nothing and is counted in the log; the provider still gets its 200, so it does not retry.
"""

import logging
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from channels.adapters.base import StatusUpdate
from channels.models import PROVIDER_STATUS_RANK, OutboundMessage

logger = logging.getLogger("channels.outbound")


def record(updates: Sequence[StatusUpdate], channel: str = "") -> int:
    """Record each update on the row sent with its provider message id (on ``channel``, when given: the providers'
    ids do not collide, and a callback URL may serve two channels, as Twilio's does); how many rows changed."""
    changed = unknown = 0
    now = timezone.now()
    for update in updates:
        rank = PROVIDER_STATUS_RANK.get(update.status)
        if rank is None or not update.provider_message_id:
            unknown += 1
            continue
        with transaction.atomic():
            rows = OutboundMessage.objects.select_for_update().filter(provider_message_id=update.provider_message_id)
            row = (rows.filter(channel=channel) if channel else rows).first()
            if row is None:
                unknown += 1
                continue
            current = PROVIDER_STATUS_RANK.get(row.provider_status, -1)
            if rank <= current:
                continue  # a repeat, or a late word about an earlier step
            row.provider_status = update.status
            row.provider_error = update.error[:255]
            row.provider_status_at = now
            row.save(update_fields=["provider_status", "provider_error", "provider_status_at", "updated_at"])
            changed += 1
    if unknown:
        logger.info("%s status update(s) about no message of ours, ignored", unknown)
    return changed
