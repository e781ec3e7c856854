"""What became of a message on the person's phone, shown where they and staff look: on its bubble in the thread
(and again when a provider's status arrives, through the page's poll), on the message's page, in the admin."""

import re
from datetime import time, timedelta

import pytest
from django.contrib.auth import get_user_model

from channels.adapters.base import StatusUpdate
from channels.models import OutboundMessage, OutboundStatus, QuietHours
from channels.outbound import statuses
from channels.outbound.decide import WINDOW_CLOSED
from tests.providers import providers  # noqa: F401  (the fixture)
from tests.test_channel_outbox import NUMBER, assistant_writes, person, refuse_next, send_due, twilio  # noqa: F401
from tests.test_console_conversation import since_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(twilio, client):  # noqa: F811
    user = person()
    client.force_login(user)
    return user


def bubble(html: str, message_id: str) -> str:
    start = html.index(f'id="{message_id}"')
    return html[start : html.index("</li>", start)]


def test_the_bubble_says_where_the_reply_went_and_how_far_it_got(client, owner, twilio):  # noqa: F811
    message = assistant_writes(owner, "Done.")
    page = client.get("/conversation/").content.decode()
    assert "SMS: waiting to be sent" in bubble(page, message.public_id)
    assert f"to {NUMBER}" in bubble(page, message.public_id)

    send_due()
    statuses.record([StatusUpdate(twilio.sent[0].provider_message_id, "delivered")])
    page = client.get("/conversation/").content.decode()
    assert 'class="badge badge--delivered">SMS: delivered' in bubble(page, message.public_id)


def unsettled(html: str) -> list[str]:
    return re.findall(r'data-statuses-of="([^"]+)" data-settled="false"', html)


def test_a_status_that_arrives_later_redraws_the_bubble_at_the_next_poll(client, owner, twilio):  # noqa: F811
    message = assistant_writes(owner, "Done.")
    send_due()
    page = client.get("/conversation/").content.decode()
    assert unsettled(page) == [message.public_id]  # sent: the provider's report is still to come

    statuses.record([StatusUpdate(twilio.sent[0].provider_message_id, "read")])
    answer = client.get("/conversation/updates/", {"since": since_of(page), "unsettled": message.public_id}).json()
    [redrawn] = answer["statuses"]
    assert redrawn["id"] == message.public_id and "SMS: read" in redrawn["html"]
    assert unsettled(redrawn["html"]) == []  # read: nothing more to ask about


def test_a_held_message_says_why_on_its_bubble(client, twilio):  # noqa: F811
    user = person("whatsapp", wrote_ago=timedelta(days=2), preferred="whatsapp")
    client.force_login(user)
    message = assistant_writes(user, "Your parcel shipped.")
    send_due()
    shown = bubble(client.get("/conversation/").content.decode(), message.public_id)
    assert "WhatsApp: held" in shown
    assert "24 hours" in shown and WINDOW_CLOSED.split(":")[0] in shown


def test_the_message_page_lists_each_part(client, owner, twilio):  # noqa: F811
    message = assistant_writes(owner, ("word " * 300).strip() + "\n\n" + ("more " * 300).strip())
    twilio.fail_next(503)
    send_due()
    page = client.get(f"/conversation/messages/{message.public_id}/").content.decode()
    assert "On your phone" in page
    assert "1 of 2" in page and "2 of 2" in page
    assert "not sent yet, trying again" in page and "503" in page


def test_the_thread_page_reads_the_phone_statuses_in_one_query(client, owner, django_assert_max_num_queries):
    for n in range(5):
        assistant_writes(owner, f"reply {n}")
    client.get("/conversation/")
    with django_assert_max_num_queries(12):
        page = client.get("/conversation/").content.decode()
    assert page.count("SMS: waiting to be sent") == 5


def test_staff_see_the_outbox_and_can_send_a_failed_text_again(client, owner, twilio):  # noqa: F811
    refuse_next(twilio)
    message = assistant_writes(owner, "Hello")
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert row.status == OutboundStatus.FAILED
    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    listing = client.get("/admin/channels/outboundmessage/").content.decode()
    assert message.public_id in listing and "21211" in listing

    answer = client.post(
        "/admin/channels/outboundmessage/", {"action": "send_again", "_selected_action": [row.pk]}, follow=True
    )
    assert "1 text(s) queued to be sent again." in answer.content.decode()
    send_due()
    row.refresh_from_db()
    assert row.status == OutboundStatus.SENT and twilio.texts_to(NUMBER) == ["Hello"]


def test_the_person_sets_and_clears_quiet_hours_in_settings(client, owner):
    page = client.get("/settings/channels/").content.decode()
    assert "Quiet hours" in page and "at any time" in page

    answer = client.post("/settings/channels/quiet-hours/", {"starts": "22:00", "ends": "07:00"}, follow=True)
    assert "from 22:00 to 07:00" in answer.content.decode()
    assert (owner.quiet_hours.starts, owner.quiet_hours.ends) == (time(22), time(7))
    assert "(Europe/Paris)" in client.get("/settings/channels/").content.decode()  # read in the person's zone

    refused = client.post("/settings/channels/quiet-hours/", {"starts": "22:00", "ends": ""})
    assert refused.status_code == 400 and "Give both times" in refused.content.decode()
    assert client.post("/settings/channels/quiet-hours/", {"starts": "", "ends": ""}).status_code == 302
    assert not QuietHours.objects.filter(person=owner).exists()


def test_quiet_hours_need_a_login_and_csrf(owner):
    from django.test import Client

    assert Client().post("/settings/channels/quiet-hours/", {"starts": "22:00", "ends": "07:00"}).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post("/settings/channels/quiet-hours/", {"starts": "22:00", "ends": "07:00"}).status_code == 403
