"""ingestion/accept.py: the current endpoint's ordinary request (a remembered key, a plain JSON body) is served
without DRF's request and response objects, and answers exactly as the full view does. Each refusal below is sent
twice with the key remembered, once served by the fast path and once with the fast path switched off (the full view
runs the checks): the status, the body, the headers a client reads and what was written must be the same, so a
check that the fast path skipped or reordered fails here."""

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.response import Response

from conversations.models import Message
from ingestion import accept as fast_path
from ingestion.hotpath import recent
from keys import tokens
from keys.models import ApiKey
from keys.scopes import Scope
from keys.services import revoke_key, set_scopes
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db

# Headers a client or the access log reads; the request id and the date differ from request to request.
_COMPARED_HEADERS = ("Content-Type", "Allow", "WWW-Authenticate", "Retry-After", "RateLimit-Policy", "Vary")


def _digest(plaintext: str) -> str:
    presented = tokens.recognise(plaintext)
    assert presented is not None
    return presented.digest


def _answer(response: Any) -> dict[str, Any]:
    body = response.json()
    if response.status_code == 429:  # the seconds left in the window may tick between the two requests
        body = {name: re.sub(r"\d+", "N", str(value)) for name, value in body.items()}
    headers = {name: response.get(name) for name in _COMPARED_HEADERS}
    if headers["Retry-After"] is not None:
        headers["Retry-After"] = "N"
    return {
        "status": response.status_code,
        "body": body,
        "headers": headers,
        "has RateLimit": response.has_header("RateLimit"),
        "messages": list(Message.objects.values_list("text", flat=True)),
    }


def _refused_twice(
    client: Any, key: ApiKey, plaintext: str, change: Callable[[], object], send: Callable[[], Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same refusal served by the fast path, then by the full view; each after a first accepted message, which
    leaves the key remembered."""
    answers = []
    for fast in (True, False):
        Message.objects.all().delete()
        cache.clear()  # the rate-limit counters
        recent.forget_all()
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=None, expires_at=None, scopes=key.scopes)
        User.objects.filter(pk=key.owner_id).update(is_active=True)
        assert post(client, CURRENT, plaintext, {"message": "accepted"}).status_code == 200
        assert recent.recall(_digest(plaintext)) is not None
        change()
        with pytest.MonkeyPatch.context() as switch:
            if not fast:
                switch.setattr(fast_path, "remembered_key", lambda request: None)
            answers.append(_answer(send()))
    return answers[0], answers[1]


def _nothing() -> None:
    pass


BODIES: dict[str, dict[str, Any]] = {
    "invalid JSON": {"raw": b'{"message": '},
    "not an object": {"raw": b"[1, 2]"},
    "empty object": {"body": {}},
    "message not a string": {"body": {"message": 5}},
    "blank message": {"body": {"message": "  "}},
    "NUL character": {"body": {"message": "a\u0000b"}},
    "lone surrogate": {"raw": b'{"message": "\\ud800"}'},
    "repeated member": {"raw": b'{"message": "a", "message": "b"}'},
    "not UTF-8": {"raw": b'{"message": "\xff"}'},
    "JSON with NaN": {"raw": b'{"message": "a", "n": NaN}'},
    "too deep": {"body": {"message": "a", "deep": json.loads("[" * 70 + "]" * 70)}},
    "charset other than UTF-8": {"body": {"message": "a"}, "content_type": "application/json; charset=latin-1"},
    "not JSON": {"raw": b"message=a", "content_type": "application/x-www-form-urlencoded"},
    "gzip": {"body": {"message": "a"}, "HTTP_CONTENT_ENCODING": "gzip"},
}


@pytest.mark.parametrize("case", BODIES)
def test_a_body_the_full_view_refuses_is_refused_alike_with_a_remembered_key(client, v2, case):
    key, plaintext = v2
    options = dict(BODIES[case])
    body, raw = options.pop("body", None), options.pop("raw", None)
    headers = {name: value for name, value in options.items() if name.startswith("HTTP_")}
    content_type = options.get("content_type", "application/json")

    def send() -> Any:
        return client.post(
            CURRENT,
            data=raw if raw is not None else json.dumps(body),
            content_type=content_type,
            headers={"Authorization": f"Bearer {plaintext}"},
            **headers,
        )

    fast, full = _refused_twice(client, key, plaintext, _nothing, send)
    assert fast["status"] in (400, 415) and fast["messages"] == ["accepted"]
    assert fast == full


def test_a_body_over_the_size_limit_is_refused_alike(client, v2, settings):
    settings.INGEST_MAX_BODY_BYTES = 200
    key, plaintext = v2

    def send() -> Any:
        return post(client, CURRENT, plaintext, {"message": "x" * 300})

    fast, full = _refused_twice(client, key, plaintext, _nothing, send)
    assert fast["status"] == 413 and fast == full


def _revoke(key: ApiKey) -> Callable[[], object]:
    return lambda: revoke_key(ApiKey.objects.get(pk=key.pk))


def _expire(key: ApiKey) -> Callable[[], object]:
    return lambda: ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def _deactivate(key: ApiKey) -> Callable[[], object]:
    return lambda: User.objects.filter(pk=key.owner_id).update(is_active=False)


def _take_send_scope(key: ApiKey) -> Callable[[], object]:
    return lambda: set_scopes(ApiKey.objects.get(pk=key.pk), [Scope.RECEIPTS_READ])


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        (_revoke, 401, "revoked_api_key"),
        (_expire, 401, "expired_api_key"),
        (_deactivate, 401, "account_disabled"),
        (_take_send_scope, 403, "insufficient_scope"),
    ],
)
def test_a_key_changed_since_it_was_remembered_is_refused_alike(client, v2, change, status, code):
    key, plaintext = v2

    def send() -> Any:
        return post(client, CURRENT, plaintext, {"message": "after"})

    fast, full = _refused_twice(client, key, plaintext, change(key), send)
    assert (fast["status"], fast["body"]["code"]) == (status, code)
    assert fast["messages"] == ["accepted"]  # nothing written
    assert fast == full


def test_the_rate_limit_refuses_alike(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"  # the accepted message uses it up
    key, plaintext = v2

    def send() -> Any:
        return post(client, CURRENT, plaintext, {"message": "one too many"})

    fast, full = _refused_twice(client, key, plaintext, _nothing, send)
    assert (fast["status"], fast["body"]["code"]) == (429, "rate_limited") and fast["has RateLimit"]
    assert fast == full


@pytest.mark.parametrize("raw", [b"not json", b'{"message": "  "}'])
def test_the_rate_limit_is_answered_before_a_bad_body(client, v2, settings, raw):
    # The fast path reads the per-key count's answer after parsing the body (ingestion/views.py); the full path
    # checks the limit first.
    settings.INGEST_RATE_LIMIT = "1/m"
    key, plaintext = v2

    def send() -> Any:
        return post(client, CURRENT, plaintext, raw=raw)

    fast, full = _refused_twice(client, key, plaintext, _nothing, send)
    assert (fast["status"], fast["body"]["code"]) == (429, "rate_limited") and fast["has RateLimit"]
    assert fast == full


@pytest.mark.parametrize("change", [_revoke, _deactivate])
def test_a_refused_key_is_answered_before_the_rate_limit_and_the_body(client, v2, settings, change):
    # The full view confirms an unconfirmed key before it answers any other refusal (ingestion/views.py).
    settings.INGEST_RATE_LIMIT = "1/m"
    key, plaintext = v2

    def send() -> Any:
        return post(client, CURRENT, plaintext, raw=b"not json")

    fast, full = _refused_twice(client, key, plaintext, change(key), send)
    assert fast["status"] == 401 and fast == full


def test_an_accepted_message_is_answered_alike_and_without_drf_s_response(client, v2):
    key, plaintext = v2
    first = post(client, CURRENT, plaintext, {"message": "one"})  # looked up: the full view
    second = post(client, CURRENT, plaintext, {"message": "two", "extra": {"ü": [1, 2.5, None]}})  # remembered

    assert isinstance(first, Response) and not isinstance(second, Response)
    assert (first.status_code, second.status_code) == (200, 200)
    assert {name.lower() for name in first.headers} == {name.lower() for name in second.headers}
    for name in _COMPARED_HEADERS:
        assert first.get(name) == second.get(name)
    ids = list(Message.objects.order_by("pk").values_list("public_id", flat=True))
    expected = {"success": True, "message": "Message sent successfully", "id": ids[0]}
    assert first.content == json.dumps(expected, separators=(",", ":")).encode()
    assert second.content == first.content.replace(ids[0].encode(), ids[1].encode())
    message = Message.objects.get(public_id=ids[1])
    assert (message.text, message.context, message.api_key_id) == (
        "two",
        {"message": "two", "extra": {"ü": [1, 2.5, None]}},
        key.pk,
    )


def test_what_the_fast_path_does_not_serve_is_served_by_the_full_view(client, v2):
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "one"}).status_code == 200
    content_type = "application/json; charset=utf-8"
    response = post(client, CURRENT, plaintext, {"message": "two"}, content_type=content_type)
    assert response.status_code == 200 and isinstance(response, Response)


def test_an_idempotency_key_request_is_one_statement_on_the_fast_path(client, v2):
    """Its record is written in the message's own statement (ingestion/idempotency.py, once_in_statement)."""
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "one"}).status_code == 200
    with CaptureQueriesContext(connection) as statements:
        first = post(client, CURRENT, plaintext, {"message": "two"}, **{"Idempotency-Key": "job-1"})
    assert first.status_code == 200 and not isinstance(first, Response)
    if connection.vendor == "postgresql":  # elsewhere the rows' own saves, in one transaction
        # (inside the test's transaction, a savepoint around it too: in production there is none to keep usable)
        sent = [statement["sql"].split()[0] for statement in statements]
        assert [verb for verb in sent if verb not in ("SAVEPOINT", "RELEASE")] == ["WITH"]
    retry = post(client, CURRENT, plaintext, {"message": "two"}, **{"Idempotency-Key": "job-1"})
    assert (retry.json(), retry["Idempotent-Replayed"], retry["Content-Type"]) == (
        first.json(),
        "true",
        "application/json",
    )
    assert not isinstance(retry, Response)
    assert Message.objects.filter(text="two").count() == 1
