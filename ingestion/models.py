from django.db import models
from django.utils import timezone


class IdempotencyRecord(models.Model):
    """The first response to a request sent with an Idempotency-Key, replayed to its retries
    (docs/design.md#idempotency).

    The row is written in the same transaction as the message it answers for, so either both exist or neither does.
    """

    # Scoped to the credential that sent the request: an API key, or a webhook trigger's token (exactly one).
    api_key = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="idempotency_records"
    )
    trigger = models.ForeignKey(
        "triggers.WebhookTrigger", null=True, blank=True, on_delete=models.CASCADE, related_name="idempotency_records"
    )
    key = models.CharField(max_length=255)
    # SHA-256 of the endpoint and the parsed body: enough to tell a changed body, and nothing of what it said.
    request_digest = models.CharField(max_length=64)
    # Empty only inside the transaction that claims the key; committed rows always hold the response.
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "key"], name="idempotency_key_unique_per_api_key"),
            models.UniqueConstraint(fields=["trigger", "key"], name="idempotency_key_unique_per_trigger"),
            models.CheckConstraint(
                condition=models.Q(api_key__isnull=True) ^ models.Q(trigger__isnull=True),
                name="idempotency_key_has_one_credential",
            ),
        ]

    def __str__(self) -> str:
        return f"Idempotency-Key {self.key[:40]} ({self.response_status})"


class FiringOutcome(models.TextChoices):
    ACCEPTED = "accepted", "Accepted"
    DUPLICATE = "duplicate", "Duplicate"  # a delivery id, signed body or Idempotency-Key seen before
    PING = "ping", "GitHub ping"
    REFUSED = "refused", "Refused"


class TriggerFiring(models.Model):
    """One line of a webhook trigger's delivery log (ingestion/trigger_log.py): a request to its URL and what became
    of it. An accepted firing is written in the statement that records its message; a refusal, duplicate or ping of
    the same kind within a minute of the last adds to that one's ``count`` instead of writing a row of its own."""

    # db_index=False: the (trigger, -id) index below serves every lookup by trigger.
    trigger = models.ForeignKey(
        "triggers.WebhookTrigger", on_delete=models.CASCADE, related_name="firings", db_index=False
    )
    outcome = models.CharField(max_length=10, choices=FiringOutcome.choices)
    code = models.CharField(max_length=40, blank=True, help_text="The error code it was refused with (ops/errors.py).")
    # A line from the payload's summary (triggers/summaries.py) or its member names, never a value that could be a
    # secret; never the token or the signature.
    summary = models.CharField(max_length=200, blank=True)
    # No index: a message is deleted with its thread, and then this table is scanned by trigger anyway (at most
    # trigger_log.LOG_LENGTH rows each); an index would cost every accepted firing a write.
    message = models.ForeignKey(
        "conversations.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    count = models.PositiveIntegerField(default=1, help_text="Requests this line stands for (coalesced refusals).")
    at = models.DateTimeField(default=timezone.now)
    last_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["trigger", "-id"], name="trigger_firing_newest_first")]
        verbose_name = "webhook trigger firing"

    def __str__(self) -> str:
        return f"{self.get_outcome_display()} {self.code} ×{self.count}".strip()
