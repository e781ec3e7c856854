"""The channel sender (the ``channels`` kind of ``manage.py worker``, delivery/work.py): the outbox's texts sent to
people's phones by the one queue worker (delivery/queue_worker.py), many sends in flight in one process, two
database connections. This module says only what is particular to a text:

- what a claimed row needs before any send, decided without the database (channels/outbound/decide.py: send, send
  the approved template, wait for quiet hours, hold for WhatsApp's window);
- the attempt: one HTTP request to the provider through its adapter, on one of CHANNEL_CONCURRENCY send threads
  (they never touch the database);
- what an outcome writes (channels/outbound/queue.py): sent with the provider's id (the sends the provider took
  together in one statement on PostgreSQL), held, or waiting for quiet hours; a failure is retried or failed by the
  queue worker's one decision.

The claimer claims up to half of CHANNEL_CONCURRENCY ahead of the free send threads, so that a thread that finishes a
send starts the next at once: claiming only for the free threads made the sends move in waves, 264 sends/s of the
320/s a provider answering in 200 ms allows with 64 threads; claiming ahead, 310/s (docs/benchmarks.md, "Channels").

Stopping (SIGTERM): claim nothing more and start no send claimed ahead (those are put back at once, uncounted); the
sends in flight get CHANNEL_GRACE_SECONDS (a send ends within CHANNEL_TIMEOUT_SECONDS, less than the grace, so in
practice all of them finish and are recorded); any that could not are put back, queued, uncounted. After SIGKILL the
leases expire and another worker takes the rows over.
"""

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from channels.adapters import configured
from channels.adapters.base import Adapter, SendError, Sent
from channels.adapters.unknown import earliest_of, resend_not_before, send_once
from channels.models import OutboundMessage
from channels.outbound import queue
from channels.outbound.decide import Hold, Send, Wait, decide
from channels.outbound.queue import Claim
from delivery.queue_worker import Failure, Finished, Naming, QueueWorker

logger = logging.getLogger("channels.outbound")

# How far the claimer claims ahead of the free send threads, as a share of CHANNEL_CONCURRENCY (see above).
AHEAD_SHARE = 0.5


def template_channels(adapters: dict[str, Adapter]) -> set[str]:
    """The channels that can send the operator's approved template outside WhatsApp's window (WhatsApp, through
    Twilio with TWILIO_WHATSAPP_TEMPLATE_SID or through Meta's Cloud API with WHATSAPP_CLOUD_TEMPLATE_NAME)."""
    return {name for name, adapter in adapters.items() if adapter.can_send_template()}


def send_now(adapter: Adapter, claim: Claim, as_template: bool, unknown_since: datetime | None) -> Finished:
    """``unknown_since``: when an earlier attempt of this send whose outcome was unknown began (read at the claim)."""
    started = time.monotonic()
    result: Sent | Exception
    try:
        # An earlier attempt that timed out may have arrived: asked before sending again (channels/adapters/unknown.py).
        result = send_once(
            adapter, claim.address, claim.text, reference=claim.reference, as_template=as_template, since=unknown_since
        )
    except Exception as error:
        result = error
    return Finished(claim, result, time.monotonic() - started, {"as_template": as_template})


class Texts:
    """What is particular to a text, for the queue worker (delivery/queue_worker.py ``Kind``)."""

    naming = Naming("outbox", "channel worker", logger)
    policy = staticmethod(queue.policy)

    def __init__(self) -> None:
        self.adapters = configured()
        self.templates = template_channels(self.adapters)
        self._channels = set(self.adapters)
        # Both for the send thread, by row id: decided at the claim (no second decision), and read at the claim for
        # the whole batch (one cache round trip a claim, not one a send).
        self._as_template: dict[int, bool] = {}
        self._unknown_since: dict[int, datetime] = {}  # only the rows an earlier attempt of which had one

    def claim(self, limit: int, *, lease_seconds: float | None = None) -> list[Claim]:
        """Claim (channels/outbound/queue.py), then read at once which of the claimed sends had an earlier attempt
        whose outcome was unknown (channels/adapters/unknown.py): their attempts ask the provider first."""
        claims = queue.claim(limit, lease_seconds=lease_seconds)
        if claims:
            found = earliest_of(claim.reference for claim in claims)
            for claim in claims:
                if claim.reference in found:
                    self._unknown_since[claim.row_id] = found[claim.reference]
        return claims

    def before_attempt(self, claim: Claim, now: datetime | None = None) -> Wait | Hold | None:
        """Quiet hours or WhatsApp's window decide some rows without a send; None: send it."""
        decision = decide(claim, now or timezone.now(), self._channels, self.templates)
        if not isinstance(decision, Send):
            self._unknown_since.pop(claim.row_id, None)  # read again at its next claim
            return decision
        self._as_template[claim.row_id] = decision.as_template
        return None

    def attempt(self, claim: Claim) -> Finished:
        as_template = self._as_template.pop(claim.row_id, None)
        if as_template is None:  # not decided at the claim (``drain``)
            decision = decide(claim, timezone.now(), self._channels, self.templates)
            if not isinstance(decision, Send):
                return Finished(claim, decision)
            as_template = decision.as_template
        unknown_since = self._unknown_since.pop(claim.row_id, None)
        return send_now(self.adapters[claim.channel], claim, as_template, unknown_since)

    def write(self, finished: Finished) -> bool | None:
        claim, result = finished.claim, finished.outcome
        if isinstance(result, Sent):
            return bool(_sent([finished]))
        if isinstance(result, Wait):
            return queue.record_quiet(claim, result.until)
        if isinstance(result, Hold):
            return queue.record_held(claim, result.reason)
        if isinstance(result, Exception):
            return None
        raise TypeError(f"a send decided but not sent: {result!r}")

    def failure(self, outcome: Exception) -> Failure:
        if isinstance(outcome, SendError):
            # A send whose outcome is unknown (a timeout) waits until the provider can say whether it took it
            # (channels/adapters/unknown.py): the retry is due no earlier than that.
            now = timezone.now()
            not_before = resend_not_before(outcome, now)
            wait = None if not_before is None else (not_before - now).total_seconds()
            return Failure(outcome.reason, retryable=outcome.retryable, retry_after=wait)
        logger.error("outbox: unexpected error sending", exc_info=outcome)
        return Failure(f"Unexpected error: {type(outcome).__name__}.")

    def retried(self, claim: Claim, error: str, due: Any) -> bool:
        return queue.record_retry(claim, error, due)

    def failed(self, claim: Claim, error: str) -> bool:
        return queue.record_failed(claim, error)

    def put_back(self, claims: Sequence[Claim]) -> int:
        return queue.put_back(claims)

    def record_together(self, finished: list[Finished]) -> list[Finished]:
        """The sends the provider took, in one statement; the rest one by one."""
        _sent([f for f in finished if isinstance(f.outcome, Sent)])
        return [f for f in finished if not isinstance(f.outcome, Sent)]

    def close(self) -> None:
        pass


def _sent(taken: list[Finished]) -> set[int]:
    written = queue.sent([(f.claim, f.outcome.provider_message_id, bool(f.extra.get("as_template"))) for f in taken])
    for f in taken:
        if f.claim.row_id in written:
            claim, milliseconds = f.claim, f.seconds * 1000
            logger.info(
                "outbox %s sent on %s (attempt %s, %.0f ms)", claim.row_id, claim.channel, claim.attempt, milliseconds
            )
    return written


class Sender(QueueWorker):
    def __init__(self, concurrency: int | None = None, batch: int | None = None) -> None:
        texts = Texts()
        concurrency = concurrency or settings.CHANNEL_CONCURRENCY
        super().__init__(
            texts,
            model=OutboundMessage,
            concurrency=concurrency,
            batch=batch or settings.CHANNEL_CLAIM_BATCH,
            ahead=max(int(concurrency * AHEAD_SHARE), 1),
            recorders=1,
            grace_seconds=lambda: float(settings.CHANNEL_GRACE_SECONDS),
            gather_seconds=0.01,  # after finished sends woke the claimer, let more finish: one claim for several
        )
        self.adapters = texts.adapters
        self.templates = texts.templates

    def hurry(self) -> None:
        """End the grace period now (a second SIGTERM): what is still in flight is put back."""
        self.stop_now()
