"""How a webhook trigger's delivery log (ingestion/trigger_log.py) reads on its page: why a refused request was
refused, in words, and what became of an accepted firing's message."""

from dataclasses import dataclass

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
    """The trigger's log, newest first (ingestion/trigger_log.py ``recent``), in the page's words."""
    return [
        LogLine(
            line=entry.line,
            count=entry.count,
            reason=REASONS.get(entry.line.code, entry.line.code) if entry.line.outcome == FiringOutcome.REFUSED else "",
            delivery=delivery_state(entry.line.message) if entry.line.message is not None else None,
            awaiting_approval=entry.awaiting_approval,
        )
        for entry in trigger_log.recent(trigger)
    ]


LOG_LENGTH_KEPT = trigger_log.LOG_LENGTH
REFUSALS_KEPT = trigger_log.REFUSALS_KEPT
