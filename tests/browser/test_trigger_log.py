"""A webhook's delivery log in a real Chromium: requests sent to the live server's webhook URL (accepted, wrong
tokens) show on its Log page, newest first, in the person's time zone; an accepted one links to its message; the
strict CSP holds and, on a phone, nothing runs off the side."""

import json
import re
import urllib.error
import urllib.request

import pytest

from accounts.services import sign_up, update_contact
from tests.browser.conftest import DESKTOP
from tests.browser.test_phone_console import EMAIL, PASSWORD, nothing_hidden_sideways, on_a_phone, signed_in
from triggers import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def send(url: str, token: str, body: dict) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-GitHub-Event": "push"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def fired(live_server, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1000/m"
    person = sign_up(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    update_contact(person, time_zone="Europe/Paris")
    trigger, token, _ = services.create_trigger(person, "A push to main", "Tell me what changed")
    url = f"{live_server.url}/api/v1/inbound/webhook/{trigger.public_id}"
    push = {"ref": "refs/heads/main", "repository": {"full_name": "acme/shop"}, "pusher": {"name": "ada"}}
    assert send(url, token, {**push, "head_commit": {"message": "Fix the checkout"}}) == 200
    for _ in range(4):
        assert send(url, token[:-1] + ("0" if token[-1] != "0" else "1"), push) == 401
    return trigger


def test_the_log_shows_what_was_sent_and_links_to_the_message(browser, live_server, fired):
    context, page = signed_in(browser, live_server, DESKTOP, timezone_id="Asia/Tokyo")
    page.goto("/webhooks/")
    page.get_by_role("link", name="Log of A push to main").click()
    page.wait_for_url(f"**/webhooks/{fired.pk}/log/")

    rows = page.locator("[data-trigger-log] tbody tr")
    assert rows.count() == 2
    refused, accepted = rows.nth(0), rows.nth(1)
    assert refused.get_attribute("data-code") == "invalid_webhook_token"
    assert "Refused" in refused.inner_text() and "4 requests" in refused.inner_text()
    assert "GitHub push to acme/shop main" in accepted.inner_text() and "“Fix the checkout”" in accepted.inner_text()
    # The person's zone (Paris: CET in winter, CEST in summer, for a firing made now), not the browser's (Tokyo).
    assert re.fullmatch(r"\w{3} \d{1,2}, \d{2}:\d{2} CES?T", accepted.locator("time").first.inner_text())

    accepted.get_by_role("link", name="View message").click()
    page.wait_for_url("**/conversation/messages/msg_*/")
    assert "Tell me what changed" in page.content()
    assert context.problems == []
    context.close()


def test_the_log_fits_a_phone(browser, live_server, fired):
    context, page = on_a_phone(browser, live_server)
    page.goto(f"/webhooks/{fired.pk}/log/")
    page.locator("[data-trigger-log]").wait_for()
    assert nothing_hidden_sideways(page) == []
    assert context.problems == []
    context.close()
