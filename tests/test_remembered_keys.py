"""ingestion/hotpath/recent.py: a worker remembers the V2 keys it found valid, and the message's insert confirms them.
Whatever
happens to a key between two of its requests, the second is answered as if the key had been looked up again."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.models import Conversation, Message
from ingestion.hotpath import memo, recent
from keys import tokens
from keys.models import ApiKey
from keys.services import revoke_key
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db


def digest_of(plaintext: str) -> str:
    presented = tokens.recognise(plaintext)
    assert presented is not None
    return presented.digest


def statements_of(response_of):
    with CaptureQueriesContext(connection) as captured:
        response = response_of()
    return response, [q["sql"] for q in captured.captured_queries]


def looked_up(statements: list[str]) -> bool:
    """Whether the key lookup (ingestion/hotpath/lookup.py: the key's columns, by its digest) is among the statements;
    the check
    of a remembered key starts SELECT 1 (SQLite) or is inside the WITH statement (PostgreSQL)."""
    return any(s.startswith("SELECT k.") for s in statements)


def test_a_key_is_remembered_after_its_first_request_and_not_looked_up_again(client, v2):
    key, plaintext = v2
    assert recent.recall(digest_of(plaintext)) is None

    first, statements = statements_of(lambda: post(client, CURRENT, plaintext, {"message": "one"}))
    assert first.status_code == 200 and looked_up(statements)
    assert recent.recall(digest_of(plaintext)).pk == key.pk

    second, statements = statements_of(lambda: post(client, CURRENT, plaintext, {"message": "two"}))
    assert second.status_code == 200 and not looked_up(statements)
    assert list(Message.objects.order_by("pk").values_list("text", "api_key_id")) == [("one", key.pk), ("two", key.pk)]


def test_a_key_revoked_since_it_was_remembered_is_refused_and_nothing_is_written(client, v2):
    key, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    revoke_key(key)  # as the console does: nothing tells the worker

    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert response.status_code == 401
    assert response.json()["code"] == "revoked_api_key"
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert list(Message.objects.values_list("text", flat=True)) == ["before"]
    assert recent.recall(digest_of(plaintext)) is None  # forgotten: the next request is looked up


def test_a_key_deleted_since_it_was_remembered_is_refused(client, v2):
    key, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    ApiKey.objects.filter(pk=key.pk).delete()

    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert (response.status_code, response.json()["code"]) == (401, "invalid_api_key")
    assert Message.objects.filter(text="after").count() == 0


def test_when_the_owner_s_thread_was_replaced_the_message_goes_to_the_new_one(client, user, v2):
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    Conversation.objects.filter(user=user).delete()  # staff deleted the thread in the admin; its messages went too

    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert response.status_code == 200
    (message,) = Message.objects.all()
    assert message.text == "after" and message.conversation == Conversation.objects.get(user=user)
    # The key is remembered with its owner's new thread: the next message needs neither lookup.
    again, statements = statements_of(lambda: post(client, CURRENT, plaintext, {"message": "again"}))
    thread_table = connection.ops.quote_name(Conversation._meta.db_table)
    assert again.status_code == 200 and not looked_up(statements)
    assert not any(s.startswith("SELECT") and f"FROM {thread_table}" in s for s in statements)


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"raw": b"{not json"},  # would be 400 invalid_json
        {"body": {"message": "x" * 10}, "content_type": "text/csv"},  # would be 415
    ],
)
def test_a_revoked_key_gets_401_whatever_else_is_wrong_with_the_request(client, v2, request_kwargs):
    key, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    revoke_key(key)

    response = post(client, CURRENT, plaintext, **request_kwargs)

    assert (response.status_code, response.json()["code"]) == (401, "revoked_api_key")


def test_a_revoked_key_over_its_rate_limit_gets_401_not_429(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    key, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    assert post(client, CURRENT, plaintext, {"message": "over"}).status_code == 429
    revoke_key(key)

    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert (response.status_code, response.json()["code"]) == (401, "revoked_api_key")


def test_a_valid_key_s_other_errors_are_unchanged(client, v2):
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200

    response = post(client, CURRENT, plaintext, raw=b"{not json")

    assert (response.status_code, response.json()["code"]) == (400, "invalid_json")
    assert recent.recall(digest_of(plaintext)) is not None


def test_a_revoked_keys_idempotent_retry_is_refused_not_replayed(client, v2):
    """A retry is replayed only once its statement has confirmed the remembered key (ingestion/idempotency.py)."""
    key, plaintext = v2
    first = post(client, CURRENT, plaintext, {"message": "once"}, **{"Idempotency-Key": "job-7"})
    assert first.status_code == 200
    revoke_key(key)

    retry, statements = statements_of(
        lambda: post(client, CURRENT, plaintext, {"message": "once"}, **{"Idempotency-Key": "job-7"})
    )

    assert (retry.status_code, retry.json()["code"]) == (401, "revoked_api_key")
    assert looked_up(statements)


def test_the_legacy_endpoint_looks_its_key_up_every_time(client, v1):
    """Its reply carries the owner's phone number and channel, which the insert does not confirm."""
    _, plaintext = v1
    assert post(client, LEGACY, plaintext, {"message": "one"}).status_code == 200

    second, statements = statements_of(lambda: post(client, LEGACY, plaintext, {"message": "two"}))

    assert second.status_code == 200 and looked_up(statements)
    assert recent.recall(digest_of(plaintext)) is None


def test_with_remembering_off_every_request_looks_the_key_up(client, v2, settings):
    settings.API_KEY_CACHE_SECONDS = 0
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "one"}).status_code == 200

    second, statements = statements_of(lambda: post(client, CURRENT, plaintext, {"message": "two"}))

    assert second.status_code == 200 and looked_up(statements)


def test_an_entry_expires(v2, settings, monkeypatch):
    settings.API_KEY_CACHE_SECONDS = 60
    key, plaintext = v2
    now = [1000.0]
    monkeypatch.setattr(recent, "_keys", memo.Memo(timer=lambda: now[0]))
    recent.remember(digest_of(plaintext), key)

    now[0] += 59.9
    assert recent.recall(digest_of(plaintext)) is key
    now[0] += 0.1
    assert recent.recall(digest_of(plaintext)) is None


def test_at_most_the_configured_number_of_keys_is_kept_the_oldest_going_first(user, settings):
    settings.API_KEY_CACHE_SIZE = 2
    keys = [make_key(user, f"job {n}") for n in range(3)]
    for key, plaintext in keys:
        recent.remember(digest_of(plaintext), key)

    assert [recent.recall(digest_of(plaintext)) for _, plaintext in keys] == [None, keys[1][0], keys[2][0]]


def test_a_revoked_key_is_never_remembered(v2):
    key, plaintext = v2
    revoke_key(key)
    recent.remember(digest_of(plaintext), key)
    assert recent.recall(digest_of(plaintext)) is None
