from django.db import models
from django.utils import timezone


class IdempotencyRecord(models.Model):
    """The first response to a request sent with an Idempotency-Key, replayed to its retries (DESIGN.md "Idempotency").

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
