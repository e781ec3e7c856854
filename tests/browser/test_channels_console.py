"""Settings → Channels in a real Chromium, against a live server and the fake providers (tests/providers.py): a
person links a number with the code the provider received, writes from it and sees the message in the open
conversation, links Telegram through the deep link the bot redeems, then unlinks the number."""

import re
import urllib.request

import pytest

from channels.models import LinkedAddress
from tests.browser.conftest import sign_up
from tests.providers import configure

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NUMBER = "+14155550134"


def test_link_a_number_write_from_it_link_telegram_and_unlink(page, live_server, settings, providers):
    configure(settings, providers, live_server.url)
    # A cold server's first page (the imports it does once) can outlast the browser context's 10 s fetch timeout
    # on a busy machine: fetched once beforehand.
    urllib.request.urlopen(live_server.url + "/signup/", timeout=120).read()
    sign_up(page, "ada@example.com")
    page.goto("/settings/")
    page.get_by_role("link", name="Channels").click()
    page.get_by_label("SMS").check()
    page.get_by_label("Phone number").fill("(415) 555-0134")
    page.get_by_role("button", name="Send a code").click()
    page.get_by_role("heading", name="Type the code").wait_for()
    code = re.search(r"\b(\d{6})\b", providers.twilio.texts_to(NUMBER)[-1]).group(1)
    page.get_by_label("Code").fill(code)
    page.get_by_role("button", name="Link", exact=True).click()
    page.get_by_text("Linked. What you send from that number").wait_for()
    assert page.locator('td[data-label="Address"]', has_text=NUMBER).count() == 1

    # The person writes from the phone while the conversation is open.
    page.get_by_role("link", name="Conversation").click()
    page.get_by_text("Live").wait_for()
    status, _ = providers.twilio.inbound(NUMBER, "Book a table for two at 8").post(live_server.url)
    assert status == 200
    page.get_by_text("Book a table for two at 8", exact=True).wait_for()
    page.get_by_text(f"SMS from {NUMBER}").first.wait_for()

    page.goto("/settings/channels/")
    page.get_by_role("button", name="Make a Telegram link").click()
    link = page.get_by_role("link", name="Open Telegram").get_attribute("href")
    token = re.fullmatch(r"https://t\.me/assistant_test_bot\?start=([A-Za-z0-9_-]+)", link or "").group(1)
    status, _ = providers.telegram.inbound(5151, f"/start {token}").post(live_server.url)
    assert status == 200
    page.get_by_role("link", name="Back to Channels").click()
    page.get_by_text("Telegram chat 5151").wait_for()

    page.get_by_role("button", name=f"Unlink SMS {NUMBER}").click()
    page.get_by_text("Unlinked.").wait_for()
    assert list(LinkedAddress.objects.values_list("channel", flat=True)) == ["telegram"]
