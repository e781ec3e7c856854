"""Idempotency-Key (docs/design.md#idempotency): a retried request gets the first response, never a second message.

How it holds, in one transaction per request:
1. On PostgreSQL, ``pg_try_advisory_xact_lock`` on (API key, Idempotency-Key). It never waits: if another transaction
   holds the lock, the first request with this key is still in flight, and the retry gets 409 at once instead of
   holding a connection while it waits.
2. INSERT the key's record. The unique constraint on (API key, Idempotency-Key) is what enforces "once": a retry
   after the first committed fails here at once, and gets the stored response replayed (422 if its body differs).
3. Record the message (the view, through ingestion.hotpath.recording.record_user_message), then store the response in
   the record. A failure anywhere rolls back the claim with the message, so a failed request leaves no record and
   can be retried with the same key.
SQLite runs one writing transaction at a time, so there a concurrent retry waits for the first and gets the replay.
"""

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from ingestion.exceptions import IdempotencyInProgress, IdempotencyKeyReused, InvalidIdempotencyKey
from ingestion.models import IdempotencyRecord
from keys.models import ApiKey
from ops.http import REPLAYED_HEADER
from ops.pruning import delete_in_batches
from triggers.models import WebhookTrigger

HEADER = "Idempotency-Key"
MAX_LENGTH = 255

Handler = Callable[..., Response]


def idempotency_key_of(request: Request) -> str | None:
    """The request's Idempotency-Key: None when absent; 1-255 printable ASCII characters, or a 400."""
    value = request.META.get("HTTP_IDEMPOTENCY_KEY")
    if value is None:
        return None
    if not value or len(value) > MAX_LENGTH or any(not " " <= ch <= "~" for ch in value):
        raise InvalidIdempotencyKey()
    if "," in value:
        # Two Idempotency-Key headers reach the application joined by a comma (RFC 9110, 5.3): one key with a
        # comma cannot be told from two keys, so neither is taken.
        raise InvalidIdempotencyKey(
            "Send one Idempotency-Key header, without commas (two headers arrive joined by a comma), for example a "
            "UUID."
        )
    return value


def request_digest(endpoint: str, body: Any) -> str:
    """SHA-256 of the endpoint and the body as parsed, so that a retry re-serialised by another client still matches."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(f"{endpoint}\n{canonical}".encode("ascii")).hexdigest()


def idempotent(post: Handler) -> Handler:
    """Wraps a view's POST handler: without the header it runs as is; with it, at most once per key (see above)."""

    @functools.wraps(post)
    def handle(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = idempotency_key_of(request)
        if key is None:
            return post(view, request, *args, **kwargs)
        credential = request.auth
        # The endpoints that use this authenticate with an API key or a webhook trigger's token.
        assert isinstance(credential, (ApiKey, WebhookTrigger))
        digest = request_digest(str(view.endpoint), request.data)
        return _once(lambda: post(view, request, *args, **kwargs), credential, key, digest)

    return handle


Credential = ApiKey | WebhookTrigger


def _scope(credential: Credential) -> dict[str, Any]:
    return {"trigger": credential} if isinstance(credential, WebhookTrigger) else {"api_key": credential}


def _once(
    run: Callable[[], Response], credential: Credential, key: str, digest: str, *, second_try: bool = False
) -> Response:
    claimed = False
    scope = _scope(credential)
    try:
        with transaction.atomic():
            _refuse_if_in_flight(credential, key)
            record = IdempotencyRecord.objects.create(**scope, key=key, request_digest=digest)
            claimed = True
            response = run()
            record.response_status = response.status_code
            record.response_body = response.data
            record.save(update_fields=["response_status", "response_body"])
            return response
    except IntegrityError:
        if claimed:
            raise  # not our constraint: a real error inside the request
    earlier = IdempotencyRecord.objects.filter(**scope, key=key).first()
    if earlier is None or _expired(earlier):
        # Pruned or expired since the INSERT failed: the key is free again, claim it once more.
        if second_try:
            raise IdempotencyInProgress()
        if earlier is not None:
            IdempotencyRecord.objects.filter(pk=earlier.pk, created_at=earlier.created_at).delete()
        return _once(run, credential, key, digest, second_try=True)
    if earlier.request_digest != digest:
        raise IdempotencyKeyReused()
    if earlier.response_status is None:
        raise IdempotencyInProgress()
    return Response(earlier.response_body, status=earlier.response_status, headers={REPLAYED_HEADER: "true"})


def _refuse_if_in_flight(credential: Credential, key: str) -> None:
    if connection.vendor != "postgresql":
        return
    scope = f"trigger {credential.pk}" if isinstance(credential, WebhookTrigger) else str(credential.pk)
    lock_id = int.from_bytes(hashlib.sha256(f"{scope}:{key}".encode("ascii")).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [lock_id])
        (acquired,) = cursor.fetchone()
    if not acquired:
        raise IdempotencyInProgress()


def _expired(record: IdempotencyRecord) -> bool:
    return record.created_at < timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)


def prune_expired() -> int:
    """Delete the records older than IDEMPOTENCY_KEY_TTL_SECONDS; returns how many."""
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    return delete_in_batches(IdempotencyRecord.objects.filter(created_at__lt=cutoff), oldest_first=("created_at",))
