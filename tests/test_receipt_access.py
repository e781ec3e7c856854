"""Who may read a receipt, and what it tells them (issue 18 item 8).

The assistant's reply goes to the person in their conversation, not to the caller (spec). A receipt is readable only
with the key that sent the message, and carries the reply only for a key whose owner allowed it ("may read
replies", off by default: at creation or on the key's page)."""

import pytest

from keys.models import ApiKey, Generation
from tests.conftest import LEGACY
from tests.console import form_nonce
from tests.factories import make_key

pytestmark = pytest.mark.django_db

RECEIPTS = "/api/v1/inbound/messages/"
REPLY_TEXT = "When should I remind you to call Sam?"  # the local assistant's question back


def get_receipt(client, key: str, message_id: str):
    return client.get(RECEIPTS + message_id, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def sent(send, v2):
    """A message sent with the fixture's V2 key (no permission to read replies), which the assistant answered."""
    return send(v2[1], {"message": "Remind me to call Sam"}).json()["id"]


def test_a_key_is_created_without_the_permission(v2):
    assert v2[0].may_read_replies is False


@pytest.mark.parametrize("generation", [Generation.V2, Generation.V1])
def test_another_key_of_the_same_account_reads_nothing(client, user, sent, generation):
    # A leaked legacy pk_ key of the same account, or a second script's key: as if the message did not exist.
    _, other = make_key(user, "another script", generation, may_read_replies=True)

    response = get_receipt(client, other, sent)

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert "Sam" not in response.content.decode()


def test_without_the_permission_the_receipt_says_what_became_of_the_message_but_not_the_reply(client, v2, sent):
    response = get_receipt(client, v2[1], sent)

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["attempts"], body["id"]) == ("delivered", 1, sent)
    assert body["finished_at"] is not None
    assert "reply" not in body
    assert REPLY_TEXT not in response.content.decode()


def test_with_the_permission_the_receipt_carries_the_reply(client, user, send):
    _, reader = make_key(user, "reads replies", may_read_replies=True)
    message_id = send(reader, {"message": "Remind me to call Sam"}).json()["id"]

    body = get_receipt(client, reader, message_id).json()

    assert REPLY_TEXT in body["reply"]["text"]


def test_a_legacy_key_reads_its_own_messages_receipt(client, send, v1):
    message_id = send(v1[1], {"message": "hi"}, path=LEGACY).json()["id"]
    body = get_receipt(client, v1[1], message_id).json()
    assert body["status"] == "delivered" and "reply" not in body


def test_the_owner_gives_and_withdraws_it_on_the_keys_page(client, user, v2, sent):
    client.force_login(user)
    page = client.get(f"/keys/{v2[0].pk}/").content.decode()
    assert 'value="replies:read"' in page and "Read the assistant" in page
    kept = [scope for scope in v2[0].scopes.split()]

    client.post(f"/keys/{v2[0].pk}/scopes/", {"scopes": [*kept, "replies:read"]})
    assert REPLY_TEXT in get_receipt(client, v2[1], sent).json()["reply"]["text"]

    client.post(f"/keys/{v2[0].pk}/scopes/", {"scopes": kept})
    assert "reply" not in get_receipt(client, v2[1], sent).json()
    assert ApiKey.objects.get(pk=v2[0].pk).may_read_replies is False


def test_someone_elses_key_cannot_be_changed(client, v2):
    from tests.factories import UserFactory

    client.force_login(UserFactory(email="mallory@example.com"))
    assert client.post(f"/keys/{v2[0].pk}/scopes/", {"scopes": ["replies:read"]}).status_code == 404
    assert ApiKey.objects.get(pk=v2[0].pk).may_read_replies is False


@pytest.mark.parametrize(("ticked", "expected"), [([], False), (["replies:read"], True)])
def test_the_add_key_form_offers_it_off_by_default(client, user, ticked, expected):
    client.force_login(user)
    form = client.get("/keys/new/").content.decode()
    assert 'value="replies:read"' in form
    assert "checked" not in form.split('value="replies:read"')[1].split(">")[0]

    nonce = form_nonce(client, "/keys/new/")
    client.post("/keys/new/", {"name": "deploy bot", "nonce": nonce, "scopes": ["messages:send", *ticked]})

    assert ApiKey.objects.get(owner=user).may_read_replies is expected


def test_the_admin_shows_it(client, v2):
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_superuser("admin@example.com", "admin@example.com", "x")
    client.force_login(staff)
    listing = client.get("/admin/keys/apikey/").content.decode()
    assert "receipts:read" in listing
    page = client.get(f"/admin/keys/apikey/{v2[0].pk}/change/").content.decode()
    assert "webhooks:manage" in page


@pytest.mark.parametrize("method", ["head", "options", "put", "delete"])
def test_a_receipt_answers_only_get(client, v2, sent, method):
    # Issue 18 item 21: the API reference says anything but GET is 405.
    response = getattr(client, method)(RECEIPTS + sent, headers={"Authorization": f"Bearer {v2[1]}"})
    assert response.status_code == 405
    assert response["Allow"] == "GET"


def test_createapikey_can_give_the_permission():
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("createapikey", email="ops@example.com", name="reader", may_read_replies=True, stdout=out)
    assert ApiKey.objects.get(name="reader").may_read_replies is True


def test_the_sent_message_reaches_the_thread_regardless(client, user, v2, sent):
    # The permission governs the receipt only: the owner sees the reply in the conversation either way.
    client.force_login(user)
    assert REPLY_TEXT in client.get("/conversation/").content.decode()
