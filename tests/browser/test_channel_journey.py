"""The conversation on the phone, the whole way, in a real Chromium: a person links a number by the code sent to
it; a script posts to api-message; the assistant's reply reaches that number at the Twilio on 127.0.0.1; the person
answers by SMS (Twilio's signed callback); the answer lands in the open thread; the assistant's next reply goes back
on the same channel; the provider's status shows on the bubble without a reload."""

import json
import re
import urllib.request

import pytest

from channels.outbound.sender import Sender
from channels.outbound.text import flatten_markdown, split_text
from tests.browser.conftest import sign_up
from tests.providers import configure, providers  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NUMBER = "+14155551234"


def post_message(base: str, key: str, text: str) -> int:
    request = urllib.request.Request(
        base + "/api/v1/inbound/api-message",
        data=json.dumps({"message": text}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


def sent_reply(twilio) -> int:
    """Run the channel worker once; the latest assistant reply reached the number, in its parts. How many parts."""
    from conversations.models import Message, Role

    before = len(twilio.sent)
    reply = Message.objects.filter(role=Role.ASSISTANT).latest("created_at", "id")
    parts = split_text(flatten_markdown(reply.text), 1600)
    assert Sender(concurrency=2).drain() == len(parts)
    assert [(m.address, m.text) for m in twilio.sent[before:]] == [(NUMBER, part) for part in parts]
    return len(parts)


def test_link_a_number_then_talk_both_ways_by_sms(page, context, live_server, providers, settings):  # noqa: F811
    from keys.services import create_key

    configure(settings, providers, live_server.url, whatsapp_through="twilio")
    context.set_default_timeout(30_000)  # a shared, busy machine: the first pages can be slow to come
    twilio = providers.twilio
    sign_up(page, "ada@example.com", phone=NUMBER)

    # Link the number: a code goes out by SMS, typing it back links it.
    page.goto("/settings/channels/")
    page.get_by_label("SMS").check()
    page.get_by_label("Phone number").fill(NUMBER)
    page.get_by_role("button", name="Send a code").click()
    page.get_by_role("heading", name="Type the code").wait_for()
    [code_text] = twilio.texts_to(NUMBER)
    code = re.search(r"\b(\d{6})\b", code_text).group(1)  # type: ignore[union-attr]
    page.get_by_label("Code").fill(code)
    page.get_by_role("button", name="Link", exact=True).click()
    page.locator("[data-linked-id]", has_text=NUMBER).wait_for()

    # A script posts to api-message; the assistant's reply reaches the number.
    from django.contrib.auth import get_user_model

    person = get_user_model().objects.get(email="ada@example.com")
    _, key = create_key(person, "deploys")
    page.goto("/conversation/")
    page.get_by_text("Live").wait_for()
    assert post_message(live_server.url, key, "Deploy of shop-api finished") == 200
    reply = page.locator(".msg--assistant").last
    reply.wait_for()
    reply.get_by_text("SMS: waiting to be sent").wait_for()
    first_parts = sent_reply(twilio)
    first_reply = twilio.sent[1]

    # The provider reports the delivery: the bubble says so, without a reload.
    assert twilio.status(first_reply.provider_message_id, "delivered").post(live_server.url)[0] == 200
    reply.get_by_text("SMS: delivered").wait_for()

    # The person answers by SMS: it lands in the open thread as theirs.
    assert twilio.inbound(NUMBER, "Thanks, roll it back if errors climb").post(live_server.url)[0] == 200
    answered = page.locator(".msg--user", has_text="Thanks, roll it back if errors climb")
    answered.wait_for()
    assert "SMS" in answered.inner_text()

    # The assistant's next reply goes back on the same channel.
    page.locator(".msg--assistant").nth(1).wait_for()
    second_parts = sent_reply(twilio)
    assert [m.address for m in twilio.sent] == [NUMBER] * (1 + first_parts + second_parts)  # the code, two replies
