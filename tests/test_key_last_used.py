"""A key's "last used" is stamped by every call it authenticates (issue 26, item 19), not only by sends, and still
at most once per KEY_LAST_USED_RESOLUTION_SECONDS per key."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from keys.models import ApiKey
from tests.conftest import CURRENT, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db


def _get(client, path, plaintext):
    return client.get(path, headers={"Authorization": f"Bearer {plaintext}"})


CALLS = {
    "profile": lambda client, key: _get(client, "/api/v1/user/profile", key),
    "mcp list": lambda client, key: _get(client, "/api/v1/mcp/connections", key),
    "receipt of an unknown id": lambda client, key: _get(client, "/api/v1/inbound/messages/msg_unknown", key),
    "webhook trigger": lambda client, key: post(
        client, "/api/v1/api-keys/webhook", key, {"condition": "When it rains", "action": "Tell me"}
    ),
    "message": lambda client, key: post(client, CURRENT, key, {"message": "hi"}),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_every_authenticated_call_stamps_last_used(client, call):
    key, plaintext = make_key()
    assert call(client, plaintext).status_code < 500
    assert ApiKey.objects.get(pk=key.pk).last_used_at is not None


def test_a_refused_scope_is_not_a_use(client):
    from keys.scopes import Scope

    key, plaintext = make_key(scopes=[Scope.MESSAGES_SEND])
    assert _get(client, "/api/v1/user/profile", plaintext).status_code == 403
    assert ApiKey.objects.get(pk=key.pk).last_used_at is None


def _stamps_during(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return sum(query["sql"].startswith('UPDATE "keys_apikey" SET "last_used_at"') for query in captured)


def test_the_stamp_is_written_at_most_once_a_minute(client):
    key, plaintext = make_key()
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(seconds=5))
    assert _stamps_during(lambda: _get(client, "/api/v1/user/profile", plaintext)) == 0  # stamped 5 s ago

    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(seconds=61))
    assert _stamps_during(lambda: _get(client, "/api/v1/user/profile", plaintext)) == 1
    assert _stamps_during(lambda: _get(client, "/api/v1/user/profile", plaintext)) == 0
