"""The official npm `poke` CLI (0.2.5, unmodified; tests/clients.py) logs in against a live server: it prints a
code and asks the desktop to open /device; a person, in a real Chromium, logs in, types the code, checks what is
asking and approves (or denies). Then `whoami`, the PyPI SDK with the token `poke login` stored, and `logout`."""

import json
import re

import pytest
from poke import Poke

from conversations.models import Message, Role
from keys.models import ApiKey, Generation
from keys.scopes import CLI
from tests.factories import UserFactory
from triggers.models import WebhookTrigger

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
USER_CODE = re.compile(r"\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b")


def code_printed_by(running) -> str:
    match = USER_CODE.search(running.wait_for_output("Waiting for authentication"))
    assert match, running.stdout()
    return match.group(1)


def person_enters_code(page, opened: str, email: str, code: str) -> None:
    """What a person does with the page the CLI opened: log in, type the code, check the request."""
    page.goto(opened)
    page.wait_for_url(re.compile(r"/login/"))
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/device"))
    page.get_by_label("Code").fill(code.lower().replace("-", ""))  # as a person might type it
    page.get_by_role("button", name="Continue").click()
    page.get_by_role("heading", name="Approve this log-in?").wait_for()
    assert code in page.inner_text("main")
    assert "poke CLI" in page.inner_text("main") or "node" in page.inner_text("main")
    assert "127.0.0.1" in page.inner_text("main")


def test_login_whoami_sdk_and_logout(page, live_server, poke_cli, poke_home, poke_sdk_env):
    user = UserFactory(email="ada@example.com")

    with poke_cli.start("login") as running:
        code = code_printed_by(running)
        # The CLI asked the desktop to open our /device page (POKE_FRONTEND).
        assert poke_home.wait_for_opened() == [f"{live_server.url}/device"]
        person_enters_code(page, poke_home.opened()[0], user.email, code)
        page.get_by_role("button", name="Approve").click()
        page.get_by_role("heading", name="Device logged in").wait_for()
        done = running.wait(timeout=30)

    assert done.returncode == 0, done.output
    assert "Logged in successfully" in done.stdout
    token = poke_home.credentials()["token"]
    key = ApiKey.objects.get(owner=user)
    assert key.generation == Generation.V2 and key.name.startswith("poke CLI (Node.js) log-in · ")
    assert token.startswith("psk_")

    # The key is on the API Keys page, named after the device and the date.
    page.goto("/keys/")
    page.get_by_role("link", name=key.name, exact=True).wait_for()

    assert key.scope_set == CLI  # what the CLI calls, as /device said before the approval
    whoami = poke_cli.run("whoami")
    assert (whoami.returncode, whoami.stdout.strip()) == (0, "ada@example.com")
    key.refresh_from_db()
    assert key.last_used_at is not None  # a profile read is a use of the key, not only a send

    # The PyPI SDK, given no key, uses the token the CLI stored.
    sent = Poke().send_message("Water the plants at 6pm")
    assert sent["success"] is True
    assert Message.objects.get(role=Role.USER, text="Water the plants at 6pm").api_key == key
    created = Poke().create_webhook(condition="When a deploy fails", action="Tell me which commit broke it")
    assert WebhookTrigger.objects.get().created_with == key
    fired = Poke().send_webhook(
        webhook_url=created["webhookUrl"], webhook_token=created["webhookToken"], data={"commit": "4f2c", "ok": False}
    )
    assert fired["success"] is True

    already = poke_cli.run("login")
    assert "Already logged in" in already.stdout

    out = poke_cli.run("logout")
    assert out.returncode == 0 and "Logged out." in out.stdout
    assert poke_home.credentials() is None
    after = poke_cli.run("whoami")
    assert after.returncode == 1 and "Not logged in" in after.stderr


def test_a_denied_login_stops_the_cli_at_once(page, live_server, poke_cli, poke_home):
    user = UserFactory(email="bo@example.com")
    with poke_cli.start("login") as running:
        code = code_printed_by(running)
        person_enters_code(page, poke_home.wait_for_opened()[0], user.email, code)
        page.get_by_role("button", name="Deny").click()
        page.get_by_role("heading", name="Log-in denied").wait_for()
        done = running.wait(timeout=30)
    assert done.returncode == 1
    assert "Run 'poke login' again" in done.stderr
    assert poke_home.credentials() is None
    assert not ApiKey.objects.exists()


def test_a_revoked_cli_key_logs_the_cli_out(poke_cli, poke_home):
    """The CLI's own rule: a 401 from the server deletes the stored token. Revoking the key on API Keys does that."""
    from keys.services import create_key, revoke_key

    key, plaintext = create_key(UserFactory(), "poke CLI (Node.js) log-in · 2026-11-24", scopes=CLI)
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": plaintext}))
    assert poke_cli.run("whoami").returncode == 0
    revoke_key(key)
    done = poke_cli.run("whoami")
    assert done.returncode == 1 and "Session expired" in done.stderr
    assert poke_home.credentials() is None
