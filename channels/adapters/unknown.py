"""A send that timed out is "unknown", not "failed": the provider may have taken it and only its answer was late.

When a send ends that way (``SendError.unknown``), the time its attempt began is remembered under the send's
``reference`` (stable across attempts), in the shared cache (Redis in production, so any worker's retry finds it).
The channel worker reads what is remembered for a whole claim at once (``earliest_of``, one cache round trip a claim
rather than one a send: that read was a seventh of the worker's CPU per send); the entry is written by the earlier
attempt before its outcome is recorded, so before the row can be claimed again. Before the same send is tried again,
``send_once`` asks the adapter whether the earlier attempt arrived (``find_sent``): when it did, its id is the
outcome and nothing is sent twice. Adapters whose provider has no way to
ask (Meta's Cloud API, Telegram, BlueBubbles) answer None, and the send goes again: that duplicate risk, per provider,
is in docs/explanation/limits.md.

The retry after an unknown outcome waits at least base.UNKNOWN_RETRY_SECONDS (``SendError.retry_after``): the
provider must have finished with the late request before it can say whether it took it.
"""

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.core.cache import cache
from django.utils import timezone

from channels.adapters.base import Adapter, SendError, Sent

logger = logging.getLogger("channels.outbound")

_KEY = "channels:unknown:{}"
# Long enough for every retry of a send (CHANNEL_RETRY_MAX_SECONDS x CHANNEL_MAX_ATTEMPTS is far below it).
REMEMBER_SECONDS = 3 * 86400


def remember(reference: str, started: datetime) -> None:
    """An attempt of this send that began at ``started`` may have reached the provider. The earliest such attempt is
    kept: the lookup searches from it."""
    try:
        cache.add(_KEY.format(reference), started.timestamp(), REMEMBER_SECONDS)
    except Exception as error:  # the cache is down: the next attempt cannot ask, the risk is the documented one
        logger.warning("outbox %s: could not remember an unknown outcome (%s)", reference, type(error).__name__)


def earliest_of(references: Iterable[str]) -> dict[str, datetime]:
    """Of these sends, those an earlier attempt of which had an unknown outcome: when the earliest such began."""
    keys = {_KEY.format(reference): reference for reference in references}
    if not keys:
        return {}
    try:
        stamps = cache.get_many(keys)
    except Exception as error:  # the cache is down: the sends go, the risk is the documented one
        logger.warning("outbox: could not read unknown outcomes (%s)", type(error).__name__)
        return {}
    zone = timezone.get_current_timezone()
    return {keys[key]: datetime.fromtimestamp(float(stamp), tz=zone) for key, stamp in stamps.items()}


def forget(reference: str) -> None:
    try:
        cache.delete(_KEY.format(reference))
    except Exception as error:  # it expires on its own
        logger.warning("outbox %s: could not forget an unknown outcome (%s)", reference, type(error).__name__)


def send_once(
    adapter: Adapter, address: str, text: str, *, reference: str, as_template: bool, since: datetime | None
) -> Sent:
    """Send, unless an earlier attempt whose outcome was unknown did arrive (then that one's id). ``since``: when the
    earliest such attempt began (``earliest_of``), None when there was none."""
    if since is not None:
        found = adapter.find_sent(address, text, since=since, as_template=as_template)
        if found is not None:
            logger.info("outbox %s: the earlier attempt had arrived (%s); not sent again", reference, found)
            forget(reference)
            return found
    started = timezone.now()
    send = adapter.send_template if as_template else adapter.send_text
    try:
        sent = send(address, text, reference=reference)
    except SendError as error:
        if error.unknown:
            remember(reference, started)
        raise
    if since is not None:
        forget(reference)
    return sent


def resend_not_before(error: Exception, now: datetime) -> datetime | None:
    """The outbox's retry decision asks this for a failed send: the earliest moment it may go again (after an unknown
    outcome, once the provider has finished with the late request), or None for the usual backoff alone."""
    wait = getattr(error, "retry_after", None) if isinstance(error, SendError) and error.unknown else None
    return now + timedelta(seconds=wait) if wait else None
