"""POST /api/v1/inbound-sms/webhook: the deprecated endpoint, V1 (pk_) keys only."""

import pytest

from conversations.models import Delivery, Endpoint, Message, Source
from tests.conftest import CURRENT, LEGACY, post

pytestmark = pytest.mark.django_db


def test_it_delivers_and_reports_the_channel_and_phone_number(client, user, v1):
    response = post(client, LEGACY, v1[1], {"message": "Add milk to my shopping list"})

    assert response.status_code == 200
    message = Message.objects.get()
    assert response.json() == {
        "success": True,
        "message": "Message sent successfully",
        "channel": "whatsapp",
        "phoneNumber": "+14155551234",
        "id": message.public_id,  # additive: the receipt's id
    }
    assert (message.source, message.text, message.api_key) == (
        Source.LEGACY_WEBHOOK,
        "Add milk to my shopping list",
        v1[0],
    )
    assert Delivery.objects.get().endpoint == Endpoint.LEGACY


def test_it_forwards_the_whole_body_as_context(client, v1):
    body = {"message": "Summarise this", "url": "https://example.com/a", "selection": {"start": 3, "end": 9}}
    post(client, LEGACY, v1[1], body)
    assert Message.objects.get().context == body


def test_it_announces_its_deprecation_and_successor(client, v1, settings):
    settings.LEGACY_SUNSET_AT = 1814400000  # 2027-07-01
    response = post(client, LEGACY, v1[1], {"message": "hi"})

    assert response["Deprecation"].startswith("@")
    assert response["Link"] == f'<http://testserver{CURRENT}>; rel="successor-version"'
    assert response["Sunset"] == "Thu, 01 Jul 2027 00:00:00 GMT"


def test_errors_carry_the_deprecation_headers_too(client, v1):
    response = post(client, LEGACY, v1[1], {"note": "no message"})
    assert response.status_code == 400
    assert "Deprecation" in response
    assert "Sunset" not in response  # no removal date is configured by default


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"text": "hi"}, "required"),
        ({}, "required"),
        ({"message": ""}, "blank"),
        ({"message": 12}, "must be a string"),
        (["hi"], "JSON object"),
    ],
)
def test_it_requires_a_message(client, v1, body, fragment):
    response = post(client, LEGACY, v1[1], body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_body"
    assert fragment in response.json()["message"]
    assert not Message.objects.exists()


def test_a_user_without_a_phone_number_gets_an_empty_one(client, db):
    from keys.models import Generation
    from tests.factories import make_key

    _, plaintext = make_key(generation=Generation.V1)
    response = post(client, LEGACY, plaintext, {"message": "hi"})
    assert response.json()["phoneNumber"] == ""
    assert response.json()["channel"] == "sms"


def test_a_person_without_a_profile_is_answered_with_the_defaults_and_the_message_is_recorded_once(client, user, v1):
    # Issue 18 item 13: the admin allows deleting a profile. The reply needs it; read after the message was
    # recorded, its absence made a 500 that said "nothing was recorded", and the caller's retry sent it twice.
    from accounts.models import Profile

    Profile.objects.filter(user=user).delete()

    response = post(client, LEGACY, v1[1], {"message": "hi"})

    assert response.status_code == 200
    assert (response.json()["channel"], response.json()["phoneNumber"]) == ("sms", "")
    assert Message.objects.get().public_id == response.json()["id"]
    assert Profile.objects.filter(user=user).count() == 1  # the default profile, back
