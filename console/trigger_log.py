"""How a webhook trigger's delivery log (ingestion/trigger_log.py) reads on its page: why a refused request was
refused, in words, and what became of an accepted firing's message."""

from dataclasses import dataclass

from assistant.models import Action, ActionState
from console.presentation import DeliveryState, delivery_state
from ingestion import trigger_log
from ingestion.models import FiringOutcome, TriggerFiring
from triggers.models import WebhookTrigger

# The error codes (ops/errors.py) the webhook's URL answers, as its owner would put them.
REASONS = {
    "invalid_webhook_token": "Wrong token: not this webhook's (another webhook's, an API key, or mistyped)",
    "missing_authorization": "No token and no signature",
    "malformed_authorization": "Authorization header not of the form “Bearer <token>”",
    "invalid_signature": "Wrong X-Hub-Signature-256: not made with this webhook's signing secret",
    "revoked_webhook_trigger": "This webhook is revoked",
    "account_disabled": "Your account is deactivated",
    "rate_limited": "Rate limited: too many requests (to this webhook, or bad ones from the sender's address)",
    "payload_too_large": "Body too large",
    "length_required": "Body sent without a Content-Length",
    "invalid_json": "Body is not valid JSON",
    "invalid_body": "Body is not a non-empty JSON object (or holds what cannot be stored)",
    "unsupported_media_type": "Body not sent as JSON (Content-Type)",
    "idempotency_key_reused": "Idempotency-Key used before with another body",
    "idempotency_in_progress": "Idempotency-Key still being processed",
    "invalid_idempotency_key": "Idempotency-Key not valid",
    "method_not_allowed": "Not a POST",
    "service_unavailable": "This service was briefly unavailable",
}


@dataclass(frozen=True, slots=True)
class LogLine:
    line: TriggerFiring
    count: int  # with the requests counted since the database last took the count
    reason: str  # for a refusal: why, in words
    delivery: DeliveryState | None  # for an accepted firing whose message is still there
    awaiting_approval: bool  # the assistant waits for the person's approval of something the message asked


def lines_of(trigger: WebhookTrigger) -> list[LogLine]:
    """The trigger's log, newest first: three queries (the lines with their messages and deliveries, the actions
    awaiting approval among them) and one cache round trip (the live counts)."""
    lines = list(
        TriggerFiring.objects.filter(trigger=trigger)
        .select_related("message__delivery")
        .order_by("-id")[: trigger_log.LOG_LENGTH]
    )
    counts = trigger_log.live_counts(lines)
    message_ids = [line.message_id for line in lines if line.message_id]
    awaiting = set(
        Action.objects.filter(delivery__message_id__in=message_ids, state=ActionState.AWAITING_APPROVAL).values_list(
            "delivery__message_id", flat=True
        )
    ) if message_ids else set()  # fmt: skip
    return [
        LogLine(
            line=line,
            count=max(line.count, counts.get(line.pk, 0)),
            reason=REASONS.get(line.code, line.code) if line.outcome == FiringOutcome.REFUSED else "",
            delivery=delivery_state(line.message) if line.message is not None else None,
            awaiting_approval=line.message_id in awaiting,
        )
        for line in lines
    ]


LOG_LENGTH_KEPT = trigger_log.LOG_LENGTH
REFUSALS_KEPT = trigger_log.REFUSALS_KEPT
