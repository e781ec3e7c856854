"""Screenshots of the console's main pages for the documentation: `make screenshots` writes docs/screenshots/*.png.

Not part of `make test` (the file name does not start with test_); run it after changing how a page looks.
"""

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounts import words
from accounts.services import sign_up as create_account
from conversations.models import Delivery, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from devices.services import start as start_device_login
from ingestion.hotpath.recording import record_user_message
from keys.models import Generation
from keys.services import create_key, revoke_key
from tests.browser.conftest import PHONE, log_in, new_context
from triggers.models import WebhookTrigger
from triggers.services import create_trigger

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
EMAIL = "ada@example.com"
PASSWORD = "a long and uncommon passphrase"


def _backdate(message: Message, when) -> None:
    Message.objects.filter(pk=message.pk).update(created_at=when)
    Delivery.objects.filter(message=message).update(created_at=when)


def _seed():
    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    now = timezone.now().replace(second=0, microsecond=0)
    deploys, _ = create_key(user, "GitHub deploys")
    monitoring, _ = create_key(user, "Uptime monitor")
    old, _ = create_key(user, "Old laptop script")
    revoke_key(old)
    create_key(user, "iOS Shortcut (legacy)", Generation.V1)
    daily = [2, 4, 1, 0, 3, 5, 4, 1, 0, 2, 6, 3, 7, 2]
    for days_ago, count in enumerate(reversed(daily)):
        for n in range(count):
            message = record_user_message(
                user=user,
                endpoint=Endpoint.CURRENT,
                text=f"Deployed shop-api to production (run {days_ago * 10 + n})",
                context={"message": "Deployed", "run": days_ago * 10 + n},
                api_key=deploys,
            )
            _backdate(message, now - timedelta(days=days_ago, hours=n + 1))
    Delivery.objects.filter(api_key=deploys).update(status="delivered")
    conversation = conversation_of(user)
    thread = [
        (Endpoint.CONSOLE, "Plan my Thursday: I have the dentist at 10 and want two hours for deep work.", None, None),
        (
            None,
            "Done. Deep work 13:00–15:00 on Thursday, blocked in your calendar; dentist stays at 10:00.",
            None,
            None,
        ),
        (
            Endpoint.CURRENT,
            "The nightly backup of db-01 failed twice. Open a ticket and remind me at 9.",
            {
                "message": "The nightly backup of db-01 failed twice. Open a ticket and remind me at 9.",
                "alert": {"host": "db-01", "check": "backup", "status": "critical"},
            },
            monitoring,
        ),
        (None, "Ticket OPS-482 opened for the db-01 backup. I'll remind you at 9:00 tomorrow.", None, None),
        (
            Endpoint.CURRENT,
            "Deployed shop-api v2.14.0 to production",
            {"message": "Deployed shop-api v2.14.0 to production", "sha": "4f2c9e1", "actor": "ada"},
            deploys,
        ),
    ]
    for minutes, (endpoint, text, context, key) in enumerate(thread):
        when = now - timedelta(minutes=(len(thread) - minutes) * 7)
        if endpoint is None:
            message = Message.objects.create(
                conversation=conversation, role=Role.ASSISTANT, source=Source.ASSISTANT, text=text
            )
        else:
            message = record_user_message(user=user, endpoint=endpoint, text=text, context=context, api_key=key)
        _backdate(message, when)
    return user, deploys


def _shoot(page, name: str, full_page: bool = True) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if full_page:
        # Chromium's full-page capture paints sticky parts (the header, the thread's composer) where the scrolled
        # viewport had them, in the middle of the picture: in a picture of the whole page they stay in place.
        # (Through the CSSOM: the console's Content-Security-Policy refuses a <style> tag.)
        page.evaluate(
            "document.querySelectorAll('.topbar, .composer')"
            ".forEach((part) => part.style.setProperty('position', 'static', 'important'))"
        )
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=full_page)


def test_screenshots(context, browser, live_server, settings):
    # Seed the thread with hand-written assistant replies rather than the built-in assistant's receipts.
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    _, deploys = _seed()
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    page = context.new_page()
    page.goto("/")
    _shoot(page, "landing")

    log_in(page, EMAIL, PASSWORD)
    _shoot(page, "api-keys")

    page.get_by_role("link", name="Add API Key").first.click()
    page.get_by_label("Name", exact=True).fill("Nightly backup check")
    page.get_by_role("button", name="Create key").click()
    page.get_by_text("It will not be shown again").wait_for()
    _shoot(page, "key-created")

    page.set_viewport_size({"width": 1280, "height": 1040})
    page.goto(f"/keys/{deploys.pk}/")
    _shoot(page, "key-detail", full_page=False)

    page.goto("/conversation/")
    page.get_by_text("Live", exact=True).wait_for()
    page.get_by_text("Context JSON").nth(-2).click()
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    _shoot(page, "conversation", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 860})

    page.goto("/settings/advanced/")
    _shoot(page, "settings-advanced")

    # Webhooks: one made earlier and fired, then a new one with its token, secret and examples shown once.
    fired, _, _ = create_trigger(deploys.owner, "A deploy of the shop fails", "Tell me which commit broke it")
    WebhookTrigger.objects.filter(pk=fired.pk).update(fire_count=3, last_fired_at=timezone.now())
    page.goto("/webhooks/")
    page.get_by_role("link", name="Add webhook").first.click()
    page.get_by_label("When").fill("A new order is placed")
    page.get_by_label("Then my assistant should").fill("Send me a summary of the order")
    page.get_by_label("Also accept signed requests (GitHub)").check()
    page.get_by_role("button", name="Create webhook").click()
    page.get_by_text("It will not be shown again").wait_for()
    _shoot(page, "webhook-created")
    page.goto("/webhooks/")
    _shoot(page, "webhooks")

    # `poke login`: the /device page as the CLI's person sees it.
    authorization, _ = start_device_login("node", "203.0.113.7")
    page.goto(f"/device?code={authorization.display_code}")
    page.get_by_role("heading", name="Approve this log-in?").wait_for()
    _shoot(page, "device-approve")

    phone = new_context(browser, live_server, PHONE)
    phone.add_cookies(context.cookies())
    small = phone.new_page()
    small.goto("/conversation/")
    small.get_by_text("Live", exact=True).wait_for()
    _shoot(small, "conversation-phone", full_page=False)
    small.goto("/keys/")
    _shoot(small, "api-keys-phone", full_page=False)
    phone.close()

    # A message's own page, from a delivery on its key's page: the message, what became of it and the reply.
    page.goto(f"/keys/{deploys.pk}/")
    page.locator('td[data-label="Message"] a').first.click()
    page.get_by_text("What became of it").wait_for()
    _shoot(page, "message")

    _shoot_what_the_assistant_does(page, deploys.owner)


def _shoot_what_the_assistant_does(page, user) -> None:
    """Connections (a real FastMCP server, shown under a public-looking address), Reminders, and the actions under a
    reply in the thread."""
    from assistant.models import Action, ToolKind
    from connections.models import Connection
    from connections.services import add_connection
    from reminders.services import schedule_reminder
    from tests.mcp_server import running_mcp_server

    with running_mcp_server() as server:
        tracker = add_connection(user, "Issue tracker", server.url, "tracker-key")
    Connection.objects.filter(pk=tracker.pk).update(server_url="https://mcp.tracker.example/mcp")
    user.profile.time_zone = "Europe/London"
    user.profile.save()
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    schedule_reminder(user, "Check the db-01 backup ticket", f"{tomorrow}T09:00")
    schedule_reminder(user, "Stand-up", f"{tomorrow}T09:30", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR")
    page.goto("/connections/")
    page.get_by_text("5 tools").click()
    _shoot(page, "connections")
    page.goto("/reminders/")
    _shoot(page, "reminders")

    alert = Message.objects.get(text__startswith="The nightly backup of db-01")
    reply = Message.objects.get(text__startswith="Ticket OPS-482")
    Delivery.objects.filter(message=alert).update(reply=reply, status="delivered")
    delivery = Delivery.objects.get(message=alert)
    started = reply.created_at - timedelta(seconds=4)
    Action.objects.create(
        delivery=delivery,
        kind=ToolKind.MCP,
        tool="create_issue",
        connection=tracker,
        connection_name="Issue tracker",
        arguments={"title": "db-01 nightly backup failed twice", "body": "Backup check critical on db-01."},
        result="Opened issue OPS-482: db-01 nightly backup failed twice",
        started_at=started,
        finished_at=started + timedelta(milliseconds=840),
    )
    Action.objects.create(
        delivery=delivery,
        kind=ToolKind.BUILT_IN,
        tool="schedule_reminder",
        round=2,
        arguments={"text": "Check the db-01 backup ticket", "when": f"{tomorrow}T09:00"},
        result=(
            "Scheduled the reminder “Check the db-01 backup ticket”: "
            f"{words.moment(datetime.fromisoformat(f'{tomorrow}T09:00'))}."
        ),
        started_at=started + timedelta(seconds=2),
        finished_at=started + timedelta(seconds=2, milliseconds=35),
    )
    page.set_viewport_size({"width": 1280, "height": 1040})
    page.goto("/conversation/")
    page.get_by_text("What the assistant did").click()
    page.get_by_text("What the assistant did").scroll_into_view_if_needed()
    _shoot(page, "conversation-actions", full_page=False)


def test_screenshots_of_the_calendar_and_the_mailbox(
    context, live_server, radicale_server, dovecot_server, smtp_server, mail_user
):
    """Connections with a calendar and a mailbox, both connected through the page's forms to real servers on
    127.0.0.1 (Radicale, Dovecot, aiosmtpd), then shown under a provider's addresses. Run alone with
    `pytest tests/browser/screenshots.py -k calendar_and_the_mailbox`."""
    from connections.models import CalendarAccount, MailAccount
    from tests.mail_servers import PASSWORD as SERVER_PASSWORD

    create_account(email="sam@example.com", password=PASSWORD, phone_number="+14155550123", channel="sms")
    page = context.new_page()
    log_in(page, "sam@example.com", PASSWORD)
    page.goto("/connections/")
    _shoot(page, "connections-forms")

    page.get_by_label("CalDAV server URL").fill(radicale_server.url)
    page.get_by_label("Username", exact=True).first.fill("ann")
    page.locator("#id_password").first.fill(SERVER_PASSWORD)
    page.get_by_role("button", name="Connect calendar").click()
    page.get_by_text("Connected your calendar").wait_for()

    form = page.locator('form[action="/connections/mailbox/"]')
    form.get_by_label("Email address").fill(f"{mail_user}@example.test")
    form.get_by_label("Username (optional)").fill(mail_user)
    form.get_by_label("App password").fill(SERVER_PASSWORD)
    form.get_by_label("IMAP server").fill("127.0.0.1")
    form.get_by_label("IMAP port").fill(str(dovecot_server.port))
    form.get_by_label("IMAP security").select_option("none")
    form.get_by_label("SMTP server").fill("127.0.0.1")
    form.get_by_label("SMTP port").fill(str(smtp_server.port))
    form.get_by_label("SMTP security").select_option("none")
    page.get_by_role("button", name="Connect mailbox").click()
    page.get_by_text("Connected your mailbox").wait_for()

    # Shown as a person with a Fastmail account would see it.
    CalendarAccount.objects.update(
        server_url="https://caldav.fastmail.com/", username="sam@fastmail.com", calendar_name="Personal"
    )
    MailAccount.objects.update(
        address="sam@fastmail.com",
        username="sam@fastmail.com",
        imap_host="imap.fastmail.com",
        imap_port=993,
        imap_security="ssl",
        smtp_host="smtp.fastmail.com",
        smtp_port=465,
        smtp_security="ssl",
    )
    page.goto("/connections/")
    _shoot(page, "connections-calendar-mailbox")


def test_channel_screenshots(context, live_server, settings, providers):
    """Settings → Channels with every provider configured (the fake ones of tests/providers.py): a number linked by
    SMS and a Telegram chat, a WhatsApp code just sent and waiting to be typed."""
    import urllib.request

    from channels.models import LinkedAddress
    from tests.providers import configure

    configure(settings, providers, live_server.url)
    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    now = timezone.now()
    sms = LinkedAddress.objects.create(user=user, channel="sms", address="+14155551234")
    LinkedAddress.objects.filter(pk=sms.pk).update(
        linked_at=now - timedelta(days=12), last_inbound_at=now - timedelta(minutes=42)
    )
    chat = LinkedAddress.objects.create(user=user, channel="telegram", address="518204377")
    LinkedAddress.objects.filter(pk=chat.pk).update(linked_at=now - timedelta(days=3))
    # A cold server's first page can outlast the context's 10 s fetch timeout on a busy machine.
    urllib.request.urlopen(live_server.url + "/login/", timeout=120).read()
    page = context.new_page()
    log_in(page, EMAIL, PASSWORD)
    page.goto("/settings/channels/")
    page.get_by_label("WhatsApp").check()
    page.get_by_label("Phone number").fill("+44 20 7946 0958")
    page.get_by_role("button", name="Send a code").click()
    page.get_by_role("heading", name="Type the code").wait_for()
    _shoot(page, "settings-channels")


def test_phone_status_screenshots(context, live_server, settings, providers):
    """The thread with what became of each reply on the person's phone (docs/explanation/outbox.md): delivered,
    read, in parts, waiting for quiet hours, retrying, held outside WhatsApp's window.
    `pytest tests/browser/screenshots.py -k phone_status` rewrites only this one."""
    from channels.models import LinkedAddress, OutboundMessage, QuietHours
    from channels.outbound.sender import Sender
    from conversations import outbound
    from tests.providers import configure

    configure(settings, providers, live_server.url, whatsapp_through="twilio")
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    LinkedAddress.objects.create(user=user, channel="sms", address="+14155551234")
    conversation = conversation_of(user)
    now = timezone.now().replace(second=0, microsecond=0)

    def say(text: str, minutes_ago: int) -> Message:
        message = Message.objects.create(
            conversation=conversation, role=Role.ASSISTANT, source=Source.ASSISTANT, text=text
        )
        outbound.written([message.pk])
        _backdate(message, now - timedelta(minutes=minutes_ago))
        return message

    typed = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Plan my Thursday, please.")
    _backdate(typed, now - timedelta(minutes=50))
    Delivery.objects.filter(message=typed).update(status="delivered")
    say("Done: **deep work 13:00–15:00** on Thursday, dentist stays at 10:00.", 49)
    say("Here is the week:\n\n" + "\n".join(f"- Day {n}: " + "planning and reviews " * 12 for n in range(1, 9)), 40)
    Sender().drain()
    first, *rest = OutboundMessage.objects.order_by("id")
    providers.twilio.status(first.provider_message_id, "delivered").post(live_server.url)
    for row in rest:
        providers.twilio.status(row.provider_message_id, "read").post(live_server.url)
    providers.twilio.fail_next(503)
    say("Your build of shop-api is green.", 20)
    Sender().drain()
    QuietHours.objects.create(
        person=user, starts=(now - timedelta(hours=1)).time(), ends=(now + timedelta(hours=7)).time()
    )
    say("Reminder: call the bank about the mortgage.", 2)
    context.set_default_timeout(30_000)  # a busy machine
    page = _log_in(context)
    page.goto("/conversation/")
    page.get_by_text("Reminder: call the bank").wait_for()
    _shoot(page, "thread-phone-status")


def _log_in(context):
    page = context.new_page()
    log_in(page, EMAIL, PASSWORD)
    return page


def test_key_life_cycle_screenshots(context, live_server, settings):
    """A key's page with its scopes, expiry and actions, and the audit log after a key's life
    (docs/howto/keys-and-scopes.md#key-life-cycle). `pytest tests/browser/screenshots.py -k life_cycle` rewrites only
    these."""
    from accounts import audit
    from connections.models import Connection
    from connections.services import remove_connection
    from keys.scopes import Scope
    from keys.services import roll_key, set_scopes

    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    deploys, _ = create_key(
        user,
        "GitHub deploys",
        scopes=[Scope.MESSAGES_SEND, Scope.RECEIPTS_READ, Scope.WEBHOOKS_MANAGE],
        expires_at=timezone.now() + timedelta(days=90),
        by=audit.CONSOLE,
    )
    create_trigger(user, "When a deploy of the shop fails", "Tell me which commit broke it", created_with=deploys)
    set_scopes(deploys, [Scope.MESSAGES_SEND, Scope.RECEIPTS_READ], by=audit.CONSOLE)
    laptop, _ = create_key(user, "Old laptop script", by=audit.CONSOLE)
    roll_key(laptop, timedelta(hours=24), by=audit.CONSOLE)
    tracker = Connection.objects.create(owner=user, name="Tracker", server_url="https://mcp.example.com/mcp")
    remove_connection(tracker, by=audit.CONSOLE)
    revoke_key(create_key(user, "Uptime monitor", by=audit.CONSOLE)[0], by=audit.CONSOLE)

    page = _log_in(context)
    page.set_viewport_size({"width": 1280, "height": 1100})
    page.goto(f"/keys/{deploys.pk}/")
    page.locator("#scopes").wait_for()
    _shoot(page, "key-scopes", full_page=False)
    page.goto("/settings/audit-log/")
    _shoot(page, "audit-log", full_page=False)


def test_approval_screenshot(context, live_server, settings):
    """The assistant asking, in the thread, whether it may act for a key's message (docs/explanation/security.md).
    `pytest tests/browser/screenshots.py -k approval` rewrites only this one."""
    import json
    import time

    from assistant.tools.toolbox import toolbox_for

    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    key, _ = create_key(user, "GitHub deploys")
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    message = record_user_message(
        user=user,
        endpoint=Endpoint.CURRENT,
        text="Deploy of shop-api failed on main (run 4812). Remind me to roll back at 6pm.",
        api_key=key,
    )
    delivery = Delivery.objects.get(message=message)
    Delivery.objects.filter(pk=delivery.pk).update(status="processing", attempts=1, started_at=timezone.now())
    delivery.refresh_from_db()
    box = toolbox_for(user, delivery, 1)
    arguments = {"text": "Roll back shop-api", "when": "2099-11-25T18:00"}
    told = box.call("call_1", "schedule_reminder", json.dumps(arguments), 1, time.monotonic() + 30)
    Delivery.objects.filter(pk=delivery.pk).update(status="delivered")
    Message.objects.create(
        conversation=conversation_of(user),
        role=Role.ASSISTANT,
        source=Source.ASSISTANT,
        text="I can set that reminder once you approve it (above).",
    )
    assert "approve" in told
    page = _log_in(context)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/conversation/")
    page.get_by_role("button", name="Approve").wait_for()
    _shoot(page, "approval", full_page=False)


def test_webhook_log_screenshot(context, live_server, settings):
    """A webhook's delivery log (docs/howto/webhooks.md): accepted firings with what became of their messages, a
    duplicate, GitHub's ping, and refusals, a flood of wrong tokens among them as one line with its count.
    `pytest tests/browser/screenshots.py -k webhook_log` rewrites only this one."""
    from assistant.models import Action, ActionState, ToolKind
    from ingestion import trigger_log
    from ingestion.models import FiringOutcome, TriggerFiring

    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    trigger, _, _ = create_trigger(user, "A push to main of acme/shop", "Tell me what changed and if it is risky")
    now = timezone.now().replace(second=0, microsecond=0)

    def push(message: str, who: str = "ada", commits: int = 1) -> dict:
        return {
            "ref": "refs/heads/main", "repository": {"full_name": "acme/shop"}, "pusher": {"name": who},
            "commits": [{}] * commits, "head_commit": {"message": message},
        }  # fmt: skip

    def accepted(payload: dict, minutes_ago: int, status: str, event: str = "push") -> Message:
        summary = trigger_log.summary_of(payload, event)
        message = record_user_message(
            user=user, endpoint=Endpoint.WEBHOOK_TRIGGER, text="Tell me what changed and if it is risky",
            context=payload, trigger=trigger, log_line=trigger_log.accepted_line(trigger, summary),
        )  # fmt: skip
        _backdate(message, now - timedelta(minutes=minutes_ago))
        Delivery.objects.filter(message=message).update(status=status)
        TriggerFiring.objects.filter(message=message).update(
            at=now - timedelta(minutes=minutes_ago), last_at=now - timedelta(minutes=minutes_ago)
        )
        return message

    def other(outcome: str, minutes_ago: int, code: str = "", summary: str = "", count: int = 1, lasted: int = 0):
        TriggerFiring.objects.create(
            trigger=trigger, outcome=outcome, code=code, summary=summary, count=count,
            at=now - timedelta(minutes=minutes_ago), last_at=now - timedelta(minutes=minutes_ago - lasted),
        )  # fmt: skip

    ping = {"zen": "Design for failure.", "repository": {"full_name": "acme/shop"}}
    other(FiringOutcome.PING, 3 * 1440, summary=trigger_log.summary_of(ping, "ping"))
    gift = push("Add the gift card option", commits=3)
    accepted(gift, 2 * 1440 + 300, "delivered")
    other(FiringOutcome.DUPLICATE, 2 * 1440 + 290, summary=trigger_log.summary_of(gift, "push"))
    other(FiringOutcome.REFUSED, 1440 + 600, code="invalid_signature")
    accepted(push("Bump the payment SDK to 4.2", who="dependabot[bot]"), 1440 + 30, "failed")
    other(FiringOutcome.REFUSED, 300, code="invalid_webhook_token", count=214, lasted=42)
    other(FiringOutcome.REFUSED, 200, code="invalid_json")
    waiting = accepted(push("Drop the old orders table", who="sam", commits=2), 55, "delivered")
    Action.objects.create(
        delivery=waiting.delivery, kind=ToolKind.BUILT_IN, tool="send_email", state=ActionState.AWAITING_APPROVAL
    )
    accepted(push("Fix the checkout total rounding"), 3, "processing")

    page = _log_in(context)
    page.goto(f"/webhooks/{trigger.pk}/log/")
    page.locator("[data-trigger-log]").wait_for()
    _shoot(page, "webhook-log")


def test_phone_approval_screenshot(browser, live_server, settings):
    """An approval request as it reads on a phone (docs/howto/approve-from-phone.md): the thread at phone width, the
    request in words with its Approve / Deny buttons and its reply code.
    `pytest tests/browser/screenshots.py -k phone_approval` rewrites only this one."""
    import json
    import time

    from assistant.models import Action
    from assistant.tools.toolbox import toolbox_for

    settings.PUBLIC_BASE_URL = "https://assistant.example.com"  # the link the request carries
    user = create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    key, _ = create_key(user, "Uptime monitor", tools_need_approval=True)
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    message = record_user_message(
        user=user,
        endpoint=Endpoint.CURRENT,
        text="db-01's nightly backup failed. Tell Bob I'm running late for the 10:00 review.",
        api_key=key,
    )
    delivery = Delivery.objects.get(message=message)
    Delivery.objects.filter(pk=delivery.pk).update(status="processing", attempts=1, started_at=timezone.now())
    delivery.refresh_from_db()
    box = toolbox_for(user, delivery, 1)
    box.add(_a_mail_tool())
    arguments = {"to": "bob@example.com", "subject": "Running late", "body": "Starting at 10:20, sorry!"}
    box.call("call_1", "mail_send", json.dumps(arguments), 1, time.monotonic() + 30)
    Delivery.objects.filter(pk=delivery.pk).update(status="delivered")
    action = Action.objects.get(delivery=delivery)
    # A fixed code for the picture (a real one is random).
    question = Message.objects.get(pk=action.approval_message_id)
    Message.objects.filter(pk=question.pk).update(text=question.text.replace(action.approval_code, "K7QZ4MX2"))
    Action.objects.filter(pk=action.pk).update(approval_code="K7QZ4MX2")
    phone = new_context(browser, live_server, PHONE, is_mobile=True, has_touch=True)
    page = phone.new_page()
    log_in(page, EMAIL, PASSWORD)
    page.goto("/conversation/")
    bubble = page.locator(f"#{question.public_id}")
    bubble.get_by_role("button", name="Approve").wait_for()
    bubble.scroll_into_view_if_needed()
    page.evaluate("document.querySelector('.composer')?.style.setProperty('display', 'none', 'important')")
    bubble.screenshot(path=str(OUT / "phone-approval.png"))
    phone.close()


def _a_mail_tool():
    """mail_send as the toolbox offers it with a mailbox connected, which never runs here (the call waits)."""
    from assistant.models import ToolKind
    from assistant.tools import Tool

    def never(arguments, call):  # the call waits for the person's answer
        raise AssertionError("not run before approval")

    return Tool(
        name="mail_send",
        description="Send an email.",
        parameters={"type": "object", "properties": {}},
        kind=ToolKind.BUILT_IN,
        run=never,
    )


def test_mcp_oauth_screenshots(context, live_server, settings):
    """An MCP server behind OAuth: the add form, the connection signed in with its tools, and one that must sign in
    again (docs/howto/mcp-connections.md). `pytest tests/browser/screenshots.py -k mcp_oauth` rewrites only these."""
    from connections.models import Connection, GrantStatus, OAuthGrant
    from tests.oauth_mcp_server import running_oauth_mcp_server

    settings.PUBLIC_BASE_URL = live_server.url
    create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    page = _log_in(context)
    page.set_viewport_size({"width": 1280, "height": 1000})
    with running_oauth_mcp_server() as server, running_oauth_mcp_server() as other:
        page.goto("/connections/")
        page.get_by_label("Name", exact=True).fill("Notes")
        page.get_by_label("Server URL", exact=True).fill(server.url)
        page.locator("#mcp_name").scroll_into_view_if_needed()
        _shoot(page, "mcp-oauth-add", full_page=False)
        page.get_by_role("button", name="Connect", exact=True).click()
        page.get_by_text("Signed in to Notes: 2 tools.").wait_for(timeout=30_000)
        page.goto("/connections/")
        page.get_by_label("Name", exact=True).fill("Team wiki")
        page.get_by_label("Server URL", exact=True).fill(other.url)
        page.get_by_role("button", name="Connect", exact=True).click()
        page.get_by_text("Signed in to Team wiki: 2 tools.").wait_for(timeout=30_000)
        wiki = Connection.objects.get(name="Team wiki")
        OAuthGrant.objects.filter(pk=wiki.oauth_grant_id).update(status=GrantStatus.SIGN_IN_AGAIN)
        page.goto("/connections/")
        page.locator("tr", has_text="Notes").get_by_text("2 tools").click()
        page.get_by_role("heading", name="MCP servers").scroll_into_view_if_needed()
        _shoot(page, "mcp-oauth-connected", full_page=False)
