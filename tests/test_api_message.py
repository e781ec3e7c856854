"""POST /api/v1/inbound/api-message: the current endpoint, V2 keys only, any non-empty JSON object."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from ingestion.models import IdempotencyRecord
from keys.models import ApiKey
from tests.conftest import CURRENT, fixture_body, post

pytestmark = pytest.mark.django_db

TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"}


def test_it_delivers_a_message_and_says_so(client, user, v2):
    key, plaintext = v2
    response = post(client, CURRENT, plaintext, {"message": "Remind me to call Sam at 5pm"})

    assert response.status_code == 200
    message = Message.objects.get()
    # The spec's two members, unchanged, and the additive id of the recorded message (the receipt's id).
    assert response.json() == {"success": True, "message": "Message sent successfully", "id": message.public_id}
    assert message.public_id.startswith("msg_")
    assert message.conversation.user == user
    assert (message.role, message.source, message.text) == (Role.USER, Source.API, "Remind me to call Sam at 5pm")
    assert message.api_key == key


def test_it_stores_the_whole_body_as_context(client, v2):
    body = fixture_body("monitoring_alert.json")
    post(client, CURRENT, v2[1], body)

    message = Message.objects.get()
    assert message.context == body
    assert message.text == body["message"]


def test_it_accepts_a_webhook_payload_without_message(client, v2):
    body = fixture_body("github_push.json")
    response = post(client, CURRENT, v2[1], body)

    assert response.status_code == 200
    message = Message.objects.get()
    assert message.text == ""
    assert message.context == body


def test_it_records_a_queued_delivery_with_the_request_id(client, v2):
    post(client, CURRENT, v2[1], {"message": "hi"}, **{"X-Request-ID": "ci-run-77"})

    delivery = Delivery.objects.get()
    assert delivery.message == Message.objects.get()
    assert (delivery.endpoint, delivery.status, delivery.api_key) == (Endpoint.CURRENT, DeliveryStatus.QUEUED, v2[0])
    assert delivery.request_id == "ci-run-77"


def test_it_returns_the_callers_request_id_or_makes_one(client, v2):
    echoed = post(client, CURRENT, v2[1], {"message": "hi"}, **{"X-Request-ID": "abc-123"})
    made = post(client, CURRENT, v2[1], {"message": "hi"})
    hostile = post(client, CURRENT, v2[1], {"message": "hi"}, **{"X-Request-ID": "x\r\nSet-Cookie: a=b"})

    assert echoed["X-Request-ID"] == "abc-123"
    assert len(made["X-Request-ID"]) == 32
    assert hostile["X-Request-ID"] != "x\r\nSet-Cookie: a=b"


def test_it_notes_when_the_key_was_last_used(client, v2):
    key, plaintext = v2
    assert key.last_used_at is None
    post(client, CURRENT, plaintext, {"message": "hi"})
    key.refresh_from_db()
    assert key.last_used_at is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("headers", [{}, {"Idempotency-Key": "job-1"}])
def test_a_recorded_message_is_not_reported_lost_when_only_the_last_used_stamp_fails(client, v2, caplog, headers):
    """The message commits on its own (autocommit) before the key's last-used stamp is written. If the database
    fails in between, the answer must not be 503 "nothing was recorded": a retry would send the message twice.
    With an Idempotency-Key everything is one transaction, which the failed stamp must not break."""
    key, plaintext = v2
    key_table = connection.ops.quote_name(ApiKey._meta.db_table)

    def stamp_fails(execute, sql, params, many, context):
        if sql.startswith(f"UPDATE {key_table}"):
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(stamp_fails):
        response = post(client, CURRENT, plaintext, {"message": "once"}, **headers)

    assert response.status_code == 200
    assert Message.objects.filter(text="once").count() == 1
    if headers:  # the stored response, for a retry to replay
        assert IdempotencyRecord.objects.get().response_status == 200
    key.refresh_from_db()
    assert key.last_used_at is None
    assert "last use" in caplog.text


def test_it_tolerates_a_trailing_slash(client, v2):
    response = post(client, CURRENT + "/", v2[1], {"message": "hi"})
    assert response.status_code == 200


def test_it_accepts_json_with_a_utf8_charset(client, v2):
    response = post(client, CURRENT, v2[1], {"message": "Grüße 👋"}, content_type="application/json; charset=utf-8")
    assert response.status_code == 200
    assert Message.objects.get().text == "Grüße 👋"


@pytest.mark.parametrize(
    ("raw", "code", "fragment"),
    [
        ("", "invalid_json", "empty"),
        ("{", "invalid_json", "line 1, column 2"),
        ('{"message": "hi",}', "invalid_json", "line 1"),
        ("[1, 2]", "invalid_body", "not an array"),
        ('"just a string"', "invalid_body", "not a string"),
        ("null", "invalid_body", "not null"),
        ("42", "invalid_body", "not a number"),
        ("{}", "invalid_body", "empty object"),
        ('{"message": 5}', "invalid_body", "must be a string"),
        ('{"message": null}', "invalid_body", "must be a string"),
        ('{"message": ["a"]}', "invalid_body", "must be a string"),
        ('{"message": "   \\n\\t "}', "invalid_body", "blank"),
        ('{"message": "a\\u0000b"}', "invalid_body", "NUL"),
        ('{"message": "hi", "extra": {"k\\u0000": 1}}', "invalid_body", "NUL"),
        ('{"message": "\\ud800"}', "invalid_body", "surrogate"),
        ('{"message": "hi", "n": NaN}', "invalid_json", "NaN"),
        ('{"message": "hi", "n": Infinity}', "invalid_json", "Infinity"),
        ('{"message": "hi", "n": 1e999}', "invalid_body", "too large"),
        ('{"message": "hi", "n": ' + "9" * 5000 + "}", "invalid_body", "longer than 4300 digits"),
        ('{"message": "hi", "deep": ' + "[" * 100 + "]" * 100 + "}", "invalid_body", "nested"),
        ('{"message": "hi", "deeper": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid_body", "nested"),
    ],
)
def test_it_refuses_bad_bodies_and_records_nothing(client, v2, raw, code, fragment):
    response = post(client, CURRENT, v2[1], raw=raw)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert response.json()["success"] is False
    assert fragment in response.json()["message"]
    assert not Message.objects.exists()
    assert not Delivery.objects.exists()


def test_it_refuses_invalid_utf8(client, v2):
    response = post(client, CURRENT, v2[1], raw=b'{"message": "\xff\xfe"}')
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data", "text/csv"])
def test_it_refuses_bodies_that_are_not_json(client, v2, content_type):
    response = post(client, CURRENT, v2[1], raw='{"message": "hi"}', content_type=content_type)

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    assert "application/json" in response.json()["message"]
    assert not Message.objects.exists()


def test_it_refuses_a_charset_other_than_utf8(client, v2):
    response = post(client, CURRENT, v2[1], raw='{"message": "hi"}', content_type="application/json; charset=latin-1")
    assert response.status_code == 415


def test_it_refuses_a_body_over_the_limit(client, v2, settings):
    settings.INGEST_MAX_BODY_BYTES = 1000
    response = post(client, CURRENT, v2[1], {"message": "x" * 1000})

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert "1000 bytes" in response.json()["message"]
    assert not Message.objects.exists()


def test_a_body_at_the_limit_is_accepted(client, v2, settings):
    body = '{"message": "' + "x" * 100 + '"}'
    settings.INGEST_MAX_BODY_BYTES = len(body)
    assert post(client, CURRENT, v2[1], raw=body).status_code == 200


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete", "head"])
def test_other_methods_get_a_json_405(client, v2, method):
    response = getattr(client, method)(CURRENT, headers={"Authorization": f"Bearer {v2[1]}"})

    assert response.status_code == 405
    assert "POST" in response["Allow"]
    if method != "head":
        assert response.json()["code"] == "method_not_allowed"


def test_authentication_is_checked_before_the_body(client, db):
    response = post(client, CURRENT, None, raw="not json", content_type="text/plain")
    assert response.status_code == 401


def test_an_accepted_request_costs_two_statements_on_postgresql_three_elsewhere(
    client, v2, settings, django_capture_on_commit_callbacks
):
    """A key looked up (as every key's first request in a process is; here each one, with remembering off). With
    the immediate task backend (the default); the database task backend adds the task's row to the same write: see
    test_task_backends.py."""
    settings.API_KEY_CACHE_SECONDS = 0
    post(client, CURRENT, v2[1], {"message": "warm up"})  # first use also writes last_used_at
    with CaptureQueriesContext(connection) as captured, django_capture_on_commit_callbacks() as after_commit:
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200

    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    if connection.vendor == "postgresql":
        # The key with its owner; then the message and its delivery in one statement, atomic by itself.
        assert statements == ["SELECT", "WITH"]
    else:
        work = [s for s in statements if s not in TRANSACTION_CONTROL]
        assert work == ["SELECT", "INSERT", "INSERT"]  # the key with its owner, the message, its delivery
    assert len(after_commit) == 1  # the hand-off, which runs only once the message is committed


def test_a_remembered_key_s_message_is_one_statement_that_also_confirms_the_key(
    client, v2, django_capture_on_commit_callbacks
):
    """The key's second request in this process: no lookup; the insert itself checks that the key still holds."""
    post(client, CURRENT, v2[1], {"message": "warm up"})  # looked up, then remembered
    with CaptureQueriesContext(connection) as captured, django_capture_on_commit_callbacks() as after_commit:
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200

    work = [q["sql"] for q in captured.captured_queries if q["sql"].split()[0] not in TRANSACTION_CONTROL]
    key_table = connection.ops.quote_name(ApiKey._meta.db_table)
    if connection.vendor == "postgresql":
        (statement,) = work  # the key's check, the message and its delivery: one statement
        assert statement.startswith("WITH g AS (SELECT 1 WHERE EXISTS") and f"FROM {key_table} k" in statement
    else:
        assert [s.split()[0] for s in work] == ["SELECT", "INSERT", "INSERT"]  # the key's check, in the transaction
        assert work[0].startswith("SELECT 1 WHERE EXISTS") and f"FROM {key_table} k" in work[0]
    assert len(after_commit) == 1
    assert Message.objects.filter(text="hi").exists()


def test_first_use_also_stamps_the_key(client, v2, django_assert_max_num_queries):
    from django.utils import timezone

    assert ApiKey.objects.get(pk=v2[0].pk).last_used_at is None
    before = timezone.now()
    with django_assert_max_num_queries(4 + len(TRANSACTION_CONTROL)) as captured:
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200
    after = timezone.now()

    stamped = ApiKey.objects.get(pk=v2[0].pk).last_used_at
    assert stamped is not None and before <= stamped <= after
    assert any(q["sql"].startswith("UPDATE") and "last_used_at" in q["sql"] for q in captured.captured_queries)


def test_the_key_lookup_is_one_query(client, v2, django_assert_num_queries):
    ApiKey.objects.filter(pk=v2[0].pk).update(revoked_at=timezone.now() - timedelta(days=1))
    with django_assert_num_queries(1):
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 401
