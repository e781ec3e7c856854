"""A request answered on the phone, seen in the console in a real Chromium: the thread shows the request in words
with its Approve / Deny buttons; the person taps Approve on Telegram (the stand-in posts the callback query to the
live server); the page, without a reload, shows the request approved and the assistant's result."""

import json
import time

import pytest

from accounts.services import sign_up
from assistant.models import Action, ActionState
from assistant.tools.toolbox import toolbox_for
from channels.adapters.base import button_data
from channels.models import LinkedAddress
from channels.outbound.sender import Sender
from conversations.models import Delivery, Endpoint
from ingestion.hotpath.recording import record_user_message
from keys.services import create_key
from reminders.models import Reminder
from tests.browser.conftest import DESKTOP
from tests.browser.test_phone_console import EMAIL, PASSWORD, signed_in
from tests.providers import configure

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHAT = "532817164"


def ask_for_a_reminder(person):
    """A key's message made the assistant want a reminder: the call waits for the person's answer."""
    key, _ = create_key(person, "GitHub deploys", tools_need_approval=True)
    message = record_user_message(
        user=person, endpoint=Endpoint.CURRENT, text="Deploy failed. Remind me to roll back at 6pm.", api_key=key
    )
    delivery = Delivery.objects.get(message=message)
    Delivery.objects.filter(pk=delivery.pk).update(status="processing", attempts=1)
    delivery.refresh_from_db()
    arguments = {"text": "Roll back shop-api", "when": "2099-11-25T18:00"}
    toolbox_for(person, delivery, 1).call(
        "call_1", "schedule_reminder", json.dumps(arguments), 1, time.monotonic() + 30
    )
    Delivery.objects.filter(pk=delivery.pk).update(status="delivered")
    return Action.objects.get(delivery=delivery)


def test_the_thread_shows_a_phone_approval_without_a_reload(browser, live_server, settings, providers):
    configure(settings, providers, live_server.url)
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # no receipts meanwhile
    person = sign_up(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    LinkedAddress.objects.create(user=person, channel="telegram", address=CHAT)
    action = ask_for_a_reminder(person)
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    Sender(concurrency=1).drain()
    [request] = [m for m in providers.telegram.sent if "Roll back shop-api" in m.text]

    context, page = signed_in(browser, live_server, DESKTOP)
    page.goto("/conversation/")
    bubble = page.locator(f"#{action.approval_message.public_id}")
    bubble.get_by_text("Remind you “Roll back shop-api” on Wed, 25 Nov 2099, 18:00 UTC.").wait_for()
    assert bubble.get_by_role("button", name="Approve").is_visible()
    page.evaluate("window.notReloaded = true")

    status, _ = providers.telegram.press(request, button_data(True, action.approval_code)).post(live_server.url)

    assert status == 200
    bubble.locator(".approval .badge").get_by_text("Approved").wait_for()
    assert bubble.get_by_role("button", name="Approve").count() == 0
    page.get_by_text("Done.").first.wait_for()  # the assistant's result arrives by the same poll
    assert page.evaluate("window.notReloaded") is True
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    assert Reminder.objects.filter(owner=person).count() == 1
    assert providers.telegram.answered[-1]["text"].startswith("Approved: remind you “Roll back shop-api”")
    assert context.problems == []
    context.close()
