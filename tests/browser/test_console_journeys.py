"""Journeys through the console in a real Chromium, against a live server and a real database."""

import json
import re
import urllib.error
import urllib.request

import pytest

from accounts.models import Profile
from keys.models import ApiKey
from tests.browser.conftest import PHONE, new_context, sign_up

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long and uncommon passphrase"
CURRENT = "/api/v1/inbound/api-message"
LEGACY = "/api/v1/inbound-sms/webhook"


def post_api(base: str, path: str, key: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def add_key(page, name: str) -> None:
    page.goto("/keys/")
    page.get_by_role("link", name="Add API Key").first.click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Create key").click()
    page.get_by_text("It will not be shown again").wait_for()
    page.wait_for_load_state("load")  # the page's scripts (copy button, history) have run


def test_sign_up_add_a_key_send_with_it_see_it_arrive_then_revoke_it(page, context, live_server):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_up(page, "ada@example.com")
    page.get_by_text("No API keys yet").wait_for()

    add_key(page, "GitHub deploys")
    page.get_by_role("button", name="Copy key").click()
    page.get_by_text("Copied to the clipboard.").wait_for()
    secret = page.evaluate("navigator.clipboard.readText()")
    assert re.fullmatch(r"psk_[0-9A-Za-z]{38}", secret)
    assert secret == page.get_by_label("Your new API key").input_value()

    # The thread is open before the message is sent: it must appear without a reload.
    page.get_by_role("link", name="Conversation").click()
    page.get_by_text("No messages yet").wait_for()
    page.get_by_text("Live", exact=True).wait_for()
    status, body = post_api(live_server.url, CURRENT, secret, {"message": "Deploy of shop-api finished", "sha": "4f2c"})
    assert (status, body["success"]) == (200, True)
    arrived = page.locator(".msg--user", has_text="Deploy of shop-api finished")
    arrived.wait_for()
    assert "API via key “GitHub deploys”" in arrived.inner_text()
    # The assistant's reply (the built-in local assistant in tests) joins the thread the same way.
    page.locator(".msg--assistant", has_text="Received through your API key “GitHub deploys”").wait_for()
    arrived.get_by_text("Context JSON").click()
    assert '"sha": "4f2c"' in arrived.locator("pre").inner_text()
    assert page.get_by_text("No messages yet").count() == 0

    # Typing in the box sends as the user, without leaving the page.
    page.get_by_role("textbox", name="Message").fill("Also book the retro for Friday")
    page.get_by_role("textbox", name="Message").press("Control+Enter")
    typed = page.locator(".msg--user", has_text="Also book the retro for Friday")
    typed.wait_for()
    assert "Typed in the app" in typed.inner_text()
    assert page.get_by_role("textbox", name="Message").input_value() == ""
    assert page.url.endswith("/conversation/")

    # The key's page counts the request.
    page.get_by_role("link", name="API Keys").click()
    page.get_by_role("link", name="GitHub deploys", exact=True).click()
    page.get_by_text("1 in total").wait_for()
    assert page.locator("svg.chart rect.bar").count() == 1
    page.get_by_role("cell", name="Deploy of shop-api finished").wait_for()

    page.get_by_role("link", name="Revoke key").click()
    page.get_by_role("heading", name="Revoke “GitHub deploys”?").wait_for()
    page.get_by_role("button", name="Revoke key").click()
    page.get_by_text("Revoked “GitHub deploys”").wait_for()
    assert "Revoked" in page.locator("tr", has_text="GitHub deploys").inner_text()

    status, body = post_api(live_server.url, CURRENT, secret, {"message": "still there?"})
    assert (status, body["code"]) == (401, "revoked_api_key")


def test_reloading_or_going_back_never_shows_the_secret_again_nor_makes_a_second_key(page, live_server):
    sign_up(page, "grace@example.com")
    add_key(page, "nightly backup")
    secret = page.get_by_label("Your new API key").input_value()
    page.wait_for_url(re.compile(r"/keys/$"))  # once.js has pointed the history entry at the list

    page.reload()
    page.get_by_role("heading", name="API Keys").wait_for()
    assert secret not in page.content()

    page.get_by_role("link", name="Conversation").click()
    page.get_by_role("heading", name="Conversation").wait_for()
    page.go_back()
    page.get_by_role("heading", name="API Keys").wait_for()
    assert secret not in page.content()
    page.go_forward()
    page.go_back()
    page.get_by_role("heading", name="API Keys").wait_for()
    assert secret not in page.content()

    assert ApiKey.objects.count() == 1


def test_a_legacy_key_under_settings_advanced(page, live_server):
    sign_up(page, "linus@example.com", phone="+442079460958")
    page.get_by_role("link", name="Settings", exact=True).click()
    page.get_by_role("link", name="Advanced").click()
    page.get_by_text("The legacy webhook is deprecated.").wait_for()

    page.get_by_label("Name", exact=True).fill("iOS Shortcut")
    page.get_by_role("button", name="Create V1 key").click()
    page.get_by_text("It will not be shown again").wait_for()
    secret = page.get_by_label("Your new API key").input_value()
    assert secret.startswith("pk_")
    assert LEGACY in page.locator("pre").first.inner_text()

    status, body = post_api(live_server.url, LEGACY, secret, {"message": "Text me the weather at 7"})
    assert status == 200
    assert (body["channel"], body["phoneNumber"]) == ("whatsapp", "+442079460958")
    status, body = post_api(live_server.url, CURRENT, secret, {"message": "wrong endpoint"})
    assert (status, body["code"]) == (401, "wrong_key_generation")

    page.get_by_role("link", name="Done, I've saved it").click()
    page.get_by_role("link", name="Revoke iOS Shortcut").click()
    page.get_by_role("button", name="Revoke key").click()
    page.get_by_text("Revoked “iOS Shortcut”").wait_for()
    assert page.url.endswith("/settings/advanced/")
    status, body = post_api(live_server.url, LEGACY, secret, {"message": "again"})
    assert (status, body["code"]) == (401, "revoked_api_key")


def fits_the_screen(page) -> bool:
    page.wait_for_load_state("load")  # the stylesheet is in
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_at_phone_width_with_the_keyboard_only(browser, live_server):
    context = new_context(browser, live_server, PHONE)
    page = context.new_page()
    keys = page.keyboard

    page.goto("/signup/")
    # The email field has the focus (autofocus, applied once the page is ready: wait for it, or the first
    # keystrokes go nowhere); every other field is one Tab further, and Enter sends the form.
    page.wait_for_function("document.activeElement && document.activeElement.name === 'email'")
    keys.type("hopper@example.com")
    for name, text in (("password1", PASSWORD), ("password2", PASSWORD), ("phone_number", "+1 415 555 1234")):
        keys.press("Tab")
        assert page.evaluate("document.activeElement.name") == name
        keys.type(text)
    keys.press("Tab")  # the channel radios: the checked one (SMS) takes the focus
    keys.press("ArrowRight")  # WhatsApp
    keys.press("Enter")
    page.wait_for_url(re.compile(r"/keys/$"))
    assert Profile.objects.get(user__email="hopper@example.com").channel == "whatsapp"
    assert fits_the_screen(page)

    # The skip link is the first stop and leads into the page; the first control there adds a key.
    keys.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Skip to content"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # focus is visible
    keys.press("Enter")
    keys.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Add API Key"
    keys.press("Enter")
    page.wait_for_url(re.compile(r"/keys/new/$"))
    page.wait_for_function("document.activeElement && document.activeElement.name === 'name'")
    keys.type("phone shortcut")  # the name field has the focus
    keys.press("Enter")
    page.get_by_text("It will not be shown again").wait_for()
    assert fits_the_screen(page)

    for path in ("/keys/", "/conversation/", "/settings/", "/settings/advanced/", f"/keys/{ApiKey.objects.get().pk}/"):
        page.goto(path)
        assert fits_the_screen(page), f"{path} scrolls sideways at phone width"

    page.goto("/conversation/")
    page.get_by_role("textbox", name="Message").focus()
    keys.type("Sent from my phone")
    keys.press("Control+Enter")
    page.locator(".msg--user", has_text="Sent from my phone").wait_for()
    problems = context.problems
    context.close()
    assert problems == []
