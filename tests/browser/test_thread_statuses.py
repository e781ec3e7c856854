"""A message's status on its bubble, in a real Chromium: it moves from retrying to delivered while the page is open,
through the page's own polling, and the bubble leads to the message's page."""

import re

import pytest

from accounts.services import sign_up
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role
from ingestion.hotpath.recording import record_user_message
from tests.browser.conftest import DESKTOP
from tests.browser.test_phone_console import EMAIL, PASSWORD, signed_in
from tests.test_console_conversation import assistant_reply
from tests.test_thread_statuses import RETRY_AT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_retried_message_shows_its_retry_then_its_delivery_without_a_reload(browser, live_server):
    person = sign_up(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    message = record_user_message(user=person, endpoint=Endpoint.CONSOLE, text="Book a table for two")
    Message.objects.filter(role=Role.ASSISTANT).delete()  # the local assistant answered at the commit: not here
    # The runtime was down: the first attempt failed and a retry is due.
    Delivery.objects.filter(message=message).update(
        status=DeliveryStatus.QUEUED, attempts=1, next_attempt_at=RETRY_AT, reply=None, last_error="refused"
    )
    context, page = signed_in(browser, live_server, DESKTOP)

    page.goto("/conversation/")
    status = page.locator(f"#{message.public_id} .msg__statuses")
    assert status.inner_text() == "Retrying at Nov 25, 17:51 UTC (1 attempt so far)"

    Delivery.objects.filter(message=message).update(
        status=DeliveryStatus.DELIVERED, attempts=2, next_attempt_at=None, reply=assistant_reply(person, "Booked.")
    )
    page.get_by_text("Booked.").wait_for()  # the reply arrives by the same poll
    page.wait_for_function(
        "id => document.querySelector('#' + id + ' .msg__statuses').textContent.trim() === 'Delivered'",
        arg=message.public_id,
    )

    status.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/conversation/messages/{message.public_id}/$"))
    assert page.locator("[data-receipt]").get_by_text("Delivered").is_visible()
    assert context.problems == []
    context.close()
