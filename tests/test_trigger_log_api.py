"""GET /api/v1/api-keys/webhook/{triggerId}/log: a trigger's delivery log for a key of its owner's account with
webhooks:manage; 403 without that scope, 404 for another account's trigger or an unknown id."""

import pytest

from conversations.models import Delivery, DeliveryStatus
from keys.models import Generation
from keys.scopes import Scope
from tests.conftest import post
from tests.factories import UserFactory, make_key
from triggers import services

pytestmark = pytest.mark.django_db


def log_of(client, trigger_id: str, key: str):
    return client.get(f"/api/v1/api-keys/webhook/{trigger_id}/log", headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def fired(client, user, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1000/m"
    trigger, token, _ = services.create_trigger(user, "A deploy fails", "Tell me which commit")
    url = f"/api/v1/inbound/webhook/{trigger.public_id}"
    message_id = post(client, url, token, {"order": 1}).json()["id"]
    Delivery.objects.filter(message__public_id=message_id).update(status=DeliveryStatus.DELIVERED)
    for _ in range(3):
        post(client, url, token[:-1] + ("0" if token[-1] != "0" else "1"), {"order": 1})
    return trigger, message_id


def test_a_key_with_webhooks_manage_reads_the_log_newest_first(client, user, fired):
    trigger, message_id = fired
    _, key = make_key(user, scopes=[Scope.WEBHOOKS_MANAGE])

    response = log_of(client, trigger.public_id, key)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["success"] is True and body["triggerId"] == trigger.public_id
    refused, accepted = body["firings"]
    assert refused["outcome"] == "refused" and refused["code"] == "invalid_webhook_token" and refused["count"] == 3
    assert refused["messageId"] is None and refused["deliveryStatus"] is None and refused["summary"] == ""
    assert accepted == {
        "at": accepted["at"],
        "lastAt": accepted["lastAt"],
        "outcome": "accepted",
        "code": None,
        "count": 1,
        "summary": "JSON object: order",
        "messageId": message_id,
        "deliveryStatus": "delivered",
    }
    assert accepted["at"].endswith("Z")


def test_without_webhooks_manage_it_is_403(client, user, fired):
    _, key = make_key(user, scopes=[Scope.MESSAGES_SEND])
    response = log_of(client, fired[0].public_id, key)
    assert response.status_code == 403 and response.json()["code"] == "insufficient_scope"
    assert "webhooks:manage" in response.json()["message"]


@pytest.mark.parametrize("trigger_id", ["someone_elses", "trg_" + "0" * 20, "nope"])
def test_another_accounts_trigger_or_an_unknown_id_is_404(client, fired, trigger_id):
    _, key = make_key(UserFactory(), scopes=[Scope.WEBHOOKS_MANAGE])
    wanted = fired[0].public_id if trigger_id == "someone_elses" else trigger_id
    response = log_of(client, wanted, key)
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_a_v1_key_or_a_webhook_token_is_refused(client, user, fired):
    _, v1 = make_key(user, generation=Generation.V1)
    assert log_of(client, fired[0].public_id, v1).status_code == 401
    _, token, _ = services.create_trigger(user, "Other", "Other")
    assert log_of(client, fired[0].public_id, token).status_code == 401
