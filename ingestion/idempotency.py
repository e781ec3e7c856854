"""Idempotency-Key (docs/design.md#idempotency): a retried request gets the first response, never a second message.

The unique constraint on (credential, Idempotency-Key) of the key's record is what enforces "once". The record is
written with the message it answers for, holding the response it will be replayed with, so either both exist or
neither does:
- The current endpoint's ordinary request (ingestion/accept.py) writes it in the message's own statement
  (``once_in_statement``): the message's id is drawn before the write, so the response is known then.
- Every other request (``idempotent``): INSERT the record, record the message, then store the response, in one
  transaction.
A retry after the first committed fails on the constraint at once and gets the stored response replayed (422 if its
body differs). A retry sent while the first is in flight waits for the first's row (PostgreSQL) or its transaction
(SQLite runs one writer at a time) and then gets the replay; if the first fails instead, the retry is the one
recorded. A failure anywhere rolls back the record with the message, so a failed request leaves nothing to replay.
"""

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from conversations.models import Message
from ingestion.exceptions import IdempotencyInProgress, IdempotencyKeyReused, InvalidIdempotencyKey
from ingestion.models import IdempotencyRecord
from keys.models import ApiKey
from ops.http import REPLAYED_HEADER
from ops.pruning import delete_in_batches
from triggers.models import WebhookTrigger

HEADER = "Idempotency-Key"
MAX_LENGTH = 255

Handler = Callable[..., Response]


def idempotency_key_of(request: Request | HttpRequest) -> str | None:
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
        return answer_once(request, str(view.endpoint), None, lambda: post(view, request, *args, **kwargs))

    return handle


def answer_once(request: Request, endpoint: str, body: Any, run: Callable[[], Response]) -> Response:
    """``run()``'s response, at most once per Idempotency-Key when the request has one; ``body``: the request's as
    parsed, or None to parse it here."""
    key = idempotency_key_of(request)
    if key is None:
        return run()
    credential = request.auth
    # The endpoints that use this authenticate with an API key or a webhook trigger's token.
    assert isinstance(credential, (ApiKey, WebhookTrigger))
    digest = request_digest(endpoint, request.data if body is None else body)
    return _once(run, credential, key, digest)


Credential = ApiKey | WebhookTrigger


def _scope(credential: Credential) -> dict[str, Any]:
    return {"trigger": credential} if isinstance(credential, WebhookTrigger) else {"api_key": credential}


def _once(
    run: Callable[[], Response], credential: Credential, key: str, digest: str, *, second_try: bool = False
) -> Response:
    claimed = False
    try:
        with transaction.atomic():
            record = IdempotencyRecord.objects.create(**_scope(credential), key=key, request_digest=digest)
            claimed = True
            response = run()
            record.response_status = response.status_code
            record.response_body = response.data
            record.save(update_fields=["response_status", "response_body"])
            return response
    except IntegrityError:
        if claimed:
            raise  # not our constraint: a real error inside the request
    stored = stored_answer(credential, key, digest)
    if stored is not None:
        return stored
    if second_try:
        raise IdempotencyInProgress()
    return _once(run, credential, key, digest, second_try=True)


def once_in_statement(
    credential: ApiKey,
    key: str,
    digest: str,
    write: Callable[[Callable[[Message], Sequence[Model]]], Message],
    answer_of: Callable[[Message], dict[str, Any]],
) -> Message | Response:
    """The message written at most once for this key, its record in the same statement: ``write(along)`` records the
    message with the rows ``along(message)`` gives, all or none (ingestion.hotpath.recording); ``answer_of`` is the
    accepted response's body for a message, known before the write. Returns the message written, or the stored
    response replayed to a retry."""

    def record_along(message: Message) -> list[Model]:
        answer = answer_of(message)
        return [
            IdempotencyRecord(api_key_id=credential.pk, key=key, request_digest=digest, response_status=200,
                              response_body=answer)
        ]  # fmt: skip

    for second_try in (False, True):
        try:
            # Alone, the statement is atomic by itself. Inside a caller's transaction (a test's), a savepoint keeps
            # that transaction usable after the constraint refuses the statement.
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                return write(record_along)
        except IntegrityError:
            stored = stored_answer(credential, key, digest)
            if stored is not None:
                return stored
            if second_try:
                raise  # not the key's record (it is free): a real error
    raise AssertionError("unreachable")


def stored_answer(credential: Credential, key: str, digest: str) -> Response | None:
    """After the key's record was found taken: the response replayed, or its error (another body: 422; a record
    without a response: 409). None when it is gone or expired since (an expired one is deleted): the key is free."""
    scope = _scope(credential)
    earlier = IdempotencyRecord.objects.filter(**scope, key=key).first()
    if earlier is None or _expired(earlier):
        if earlier is not None:
            IdempotencyRecord.objects.filter(pk=earlier.pk, created_at=earlier.created_at).delete()
        return None
    if earlier.request_digest != digest:
        raise IdempotencyKeyReused()
    if earlier.response_status is None:
        raise IdempotencyInProgress()
    return Response(earlier.response_body, status=earlier.response_status, headers={REPLAYED_HEADER: "true"})


def _expired(record: IdempotencyRecord) -> bool:
    return record.created_at < timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)


def prune_expired() -> int:
    """Delete the records older than IDEMPOTENCY_KEY_TTL_SECONDS; returns how many."""
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    return delete_in_batches(IdempotencyRecord.objects.filter(created_at__lt=cutoff), oldest_first=("created_at",))
