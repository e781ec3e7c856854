"""What became of each message, on its bubble in the thread: queued, retrying at …, being delivered, delivered,
failed, kept current by the page's polling (/conversation/updates/), each bubble linking to the message's page."""

import re
from datetime import UTC, datetime

import pytest

from accounts.services import update_contact
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message
from ingestion.hotpath.recording import record_user_message
from tests.factories import UserFactory
from tests.test_console_conversation import assistant_reply, since_of

pytestmark = pytest.mark.django_db

RETRY_AT = datetime(2026, 11, 25, 17, 51, tzinfo=UTC)  # 12:51 in New York


@pytest.fixture
def signed_in(client, user):
    update_contact(user, time_zone="America/New_York")
    client.force_login(user)
    return client


def bubble(page: str, message: Message) -> str:
    found = re.search(rf'<li class="msg[^"]*" id="{message.public_id}">(.*?)</li>', page, re.S)
    assert found is not None, f"no bubble for {message.public_id}"
    return found[1]


def status_text(html: str) -> str:
    found = re.search(r'<[a-z]+ class="msg__statuses"[^>]*>(.*?)</(?:div|p)>', html, re.S)
    assert found is not None, "no statuses on the bubble"
    return " ".join(re.sub(r"<[^>]+>", "", found[1]).split())


def set_delivery(message: Message, **fields) -> None:
    Delivery.objects.filter(message=message).update(**fields)


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({}, "Queued: waiting for the assistant"),
        ({"attempts": 2, "next_attempt_at": RETRY_AT}, "Retrying at Nov 25, 12:51 EST (2 attempts so far)"),
        ({"status": DeliveryStatus.PROCESSING, "attempts": 1}, "With the assistant now"),
        ({"status": DeliveryStatus.DELIVERED, "attempts": 1}, "Delivered"),
        ({"status": DeliveryStatus.FAILED, "attempts": 5}, "Failed after 5 attempts"),
    ],
)
def test_each_message_s_bubble_says_what_became_of_it(signed_in, user, fields, shown):
    message = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Book a table")
    set_delivery(message, **fields)

    html = bubble(signed_in.get("/conversation/").content.decode(), message)

    assert status_text(html) == shown
    assert f'href="/conversation/messages/{message.public_id}/"' in html


def test_every_bubble_links_to_its_message_s_page_and_a_reply_has_no_delivery_status(signed_in, user):
    reply = assistant_reply(user, "Done.")

    html = bubble(signed_in.get("/conversation/").content.decode(), reply)

    assert f'href="/conversation/messages/{reply.public_id}/"' in html
    assert "msg__statuses" not in html


def test_the_poll_brings_the_new_status_of_a_message_the_page_shows_as_unsettled(signed_in, user):
    message = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Book a table")
    settled = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Older")
    set_delivery(settled, status=DeliveryStatus.DELIVERED)
    page = signed_in.get("/conversation/").content.decode()
    assert 'data-settled="false"' in bubble(page, message)
    assert 'data-settled="true"' in bubble(page, settled)

    set_delivery(message, attempts=1, next_attempt_at=RETRY_AT)
    data = signed_in.get("/conversation/updates/", {"since": since_of(page), "unsettled": message.public_id}).json()
    (status,) = data["statuses"]
    assert status["id"] == message.public_id
    assert status_text(status["html"]) == "Retrying at Nov 25, 12:51 EST (1 attempt so far)"

    set_delivery(message, status=DeliveryStatus.DELIVERED, next_attempt_at=None)
    data = signed_in.get("/conversation/updates/", {"since": data["since"], "unsettled": message.public_id}).json()
    assert status_text(data["statuses"][0]["html"]) == "Delivered"
    assert 'data-settled="true"' in data["statuses"][0]["html"]


def test_the_poll_tells_statuses_of_ones_own_messages_only(signed_in, user):
    other = record_user_message(user=UserFactory(email="eve@example.com"), endpoint=Endpoint.CONSOLE, text="not yours")
    data = signed_in.get(
        "/conversation/updates/", {"since": datetime.now(UTC).isoformat(), "unsettled": f"{other.public_id},nonsense"}
    ).json()

    assert data["statuses"] == []
