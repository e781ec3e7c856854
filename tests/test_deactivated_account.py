"""A deactivated account (is_active off, set by staff) is refused with 401 from its next request, on both message
endpoints and the receipts, remembered keys included (issue 18 item 9).

Deactivation here is a plain UPDATE of the users table, as staff's change in the admin of another process is: nothing
tells this process, so only the lookup's and the insert's own conditions can refuse it."""

import pytest
from django.contrib.auth import get_user_model

from conversations.models import Message
from ingestion.hotpath import recent
from keys import tokens
from tests.conftest import CURRENT, LEGACY, post

pytestmark = pytest.mark.django_db

RECEIPTS = "/api/v1/inbound/messages/"


def deactivate(user, active: bool = False) -> None:
    get_user_model().objects.filter(pk=user.pk).update(is_active=active)


def assert_disabled(response) -> None:
    assert response.status_code == 401
    body = response.json()
    assert (body["success"], body["code"]) == (False, "account_disabled")
    assert "deactivated" in body["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_the_current_endpoint_refuses_a_remembered_key_of_a_deactivated_account(client, user, v2):
    _, plaintext = v2
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    assert recent.recall(tokens.recognise(plaintext).digest) is not None  # the next request skips the lookup

    deactivate(user)
    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert_disabled(response)
    assert list(Message.objects.values_list("text", flat=True)) == ["before"]
    assert recent.recall(tokens.recognise(plaintext).digest) is None


def test_the_current_endpoint_refuses_a_key_it_looks_up(client, user, v2):
    deactivate(user)
    assert_disabled(post(client, CURRENT, v2[1], {"message": "hi"}))
    assert post(client, CURRENT, v2[1], {"message": "hi"}, **{"Idempotency-Key": "k1"}).status_code == 401
    assert not Message.objects.exists()


def test_the_legacy_endpoint_refuses_it(client, user, v1):
    assert post(client, LEGACY, v1[1], {"message": "before"}).status_code == 200
    deactivate(user)
    assert_disabled(post(client, LEGACY, v1[1], {"message": "after"}))
    assert Message.objects.filter(text="after").count() == 0


def test_receipts_refuse_it(client, user, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    deactivate(user)
    assert_disabled(client.get(RECEIPTS + message_id, headers={"Authorization": f"Bearer {v2[1]}"}))


def test_a_reactivated_account_works_again(client, user, v2):
    deactivate(user)
    assert post(client, CURRENT, v2[1], {"message": "no"}).status_code == 401
    deactivate(user, active=True)
    assert post(client, CURRENT, v2[1], {"message": "yes"}).status_code == 200


def test_a_deactivated_account_counts_as_a_failed_authentication(client, user, v2, settings):
    # A deactivated account's key is refused like any other 401: it counts toward the address's failure limit.
    settings.AUTH_FAILURE_RATE_LIMIT = "2/m"
    deactivate(user)
    codes = [post(client, CURRENT, v2[1], {"message": "x"}).status_code for _ in range(3)]
    assert codes == [401, 401, 429]
