"""A person approves a reminder, a calendar event and a mail from Telegram, WhatsApp and SMS, and each runs once
(issue 30, item 4). A script's message (an API key's) reaches the model-backed assistant, played by a scripted
chat-completions server on 127.0.0.1, which asks for the call; the call waits; the request goes through the outbox
to the channel's stand-in (tests/providers.py); the person answers there (a Telegram tap, a WhatsApp reply button,
"YES K7QZ4MX2" by SMS) through the real inbound view; the approved call runs against Radicale, Dovecot and aiosmtpd on
127.0.0.1, or a Microsoft calendar (connected by signing in on the console) on the Graph stand-in. A second answer
runs nothing more."""

import caldav
import icalendar
import pytest
from django.utils import timezone

from assistant.models import Action, ActionState
from channels.adapters.base import button_data
from channels.models import LinkedAddress
from channels.outbound.sender import Sender
from connections import mailcal
from connections.models import GrantKind
from reminders.models import Reminder
from tests import oauth_mail_servers as peers
from tests.factories import make_key
from tests.mail_servers import PASSWORD
from tests.test_assistant_tools import call, completion
from tests.test_graph_calendar import graph
from tests.test_mail_calendar_connections import mailbox_fields
from tests.test_oauth_mail import address, microsoft, sign_in

oauth, oauth_dovecot, xoauth2_smtp, caldav_server = (
    peers.oauth,
    peers.oauth_dovecot,
    peers.xoauth2_smtp,
    peers.caldav_server,
)
__all__ = ["address", "graph", "microsoft"]  # fixtures, used by name

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

NUMBER = "+14155551234"
CHAT = "532817164"
ADDRESS = {"telegram": CHAT, "whatsapp": NUMBER, "sms": NUMBER}

CALLS = {
    "reminder": ("schedule_reminder", {"text": "Renew the domain", "when": "2099-01-05T15:00"}),
    "event": (
        "calendar_create_event",
        {"summary": "Lunch with Sam", "start": "2099-12-04T13:00", "end": "2099-12-04T14:00"},
    ),
    "mail": ("mail_send", {"to": "bob@example.test", "subject": "Running late", "body": "Starting at 10:20."}),
}
CALLS["microsoft_event"] = CALLS["event"]
IN_WORDS = {
    "reminder": "Remind you “Renew the domain” on Mon, 5 Jan 2099, 15:00.",
    "event": "Add “Lunch with Sam” to your calendar, Fri, 4 Dec 2099, 13:00–14:00.",
    "mail": "Send an email to bob@example.test, subject “Running late”.",
}
IN_WORDS["microsoft_event"] = IN_WORDS["event"]


@pytest.fixture
def deliver(client, django_capture_on_commit_callbacks):
    def deliver(callback):
        with django_capture_on_commit_callbacks(execute=True):
            response = callback.send(client)
        assert response.status_code == 200
        return response

    return deliver


@pytest.fixture
def tools(request, user, tmp_path):
    """What the approved calls act on: a calendar (Radicale), a mailbox (Dovecot and aiosmtpd)."""
    user.profile.time_zone = "Europe/Paris"
    user.profile.save()
    what = request.param
    if what == "event":
        radicale = request.getfixturevalue("radicale_server")
        mailcal.add_calendar(user, radicale.url, "ann", PASSWORD)
        return what, radicale
    if what == "microsoft_event":  # signed in with Microsoft on the console; events on the Graph stand-in
        graph_server = request.getfixturevalue("graph")
        client = request.getfixturevalue("client")
        client.force_login(user)
        sign_in(client, GrantKind.MICROSOFT, ("calendar",))
        return what, (graph_server, request.getfixturevalue("address"))
    if what == "mail":
        dovecot, smtp = request.getfixturevalue("dovecot_server"), request.getfixturevalue("smtp_server")
        mail_user = request.getfixturevalue("mail_user")
        mailcal.add_mailbox(user, mailbox_fields(dovecot, smtp, mail_user))
        return what, smtp
    return what, None


def runs(what: str, server, user) -> int:
    """How many times the approved call took effect."""
    if what == "reminder":
        return Reminder.objects.filter(owner=user, text="Renew the domain").count()
    if what == "event":
        dav = caldav.DAVClient(url=server.url, username="ann", password=PASSWORD)
        events = dav.principal().calendars()[0].events()
        summaries = [str(icalendar.Calendar.from_ical(e.data).walk("VEVENT")[0]["SUMMARY"]) for e in events]
        return summaries.count("Lunch with Sam")
    if what == "microsoft_event":
        graph_server, address = server
        return [event["subject"] for event in graph_server.of(address)].count("Lunch with Sam")
    return sum(1 for message in server.received if message["Subject"] == "Running late")


def answer_on(channel: str, providers, action: Action):
    """The person's Approve, as the channel's provider posts it."""
    code = action.approval_code
    if channel == "telegram":
        [request] = [m for m in providers.telegram.sent if m.fields.get("reply_markup")]
        return providers.telegram.press(request, button_data(True, code))
    if channel == "whatsapp":
        [request] = [m for m in providers.whatsapp.sent if m.fields.get("type") == "interactive"]
        tap = button_data(True, code)
        return providers.whatsapp.button_reply(NUMBER, tap, "Approve", to=request.provider_message_id)
    return providers.twilio.inbound(NUMBER, f"YES {code}")


@pytest.mark.parametrize("tools", ["reminder", "event", "microsoft_event", "mail"], indirect=True)
@pytest.mark.parametrize("channel", ["telegram", "whatsapp", "sms"])
def test_approved_from_the_phone_it_runs_once(channel, tools, user, llm, providers, send, deliver):
    what, server = tools
    # Written from there a moment ago: WhatsApp's 24-hour window is open.
    LinkedAddress.objects.create(user=user, channel=channel, address=ADDRESS[channel], last_inbound_at=timezone.now())
    _, key = make_key(user, "nightly backup", tools_need_approval=True)
    tool, arguments = CALLS[what]
    llm.answer(200, completion(tool_calls=[call(tool, arguments)]))
    llm.answer(200, completion("That waits for your approval."))
    llm.answer(200, completion("Done."))

    send(key, {"message": "Take care of it"})

    action = Action.objects.get(tool=tool)
    assert action.state == ActionState.AWAITING_APPROVAL and runs(what, server, user) == 0
    Sender(concurrency=1).drain()
    texts = [m.text for p in providers.all() for m in p.sent]
    assert any(IN_WORDS[what] in text for text in texts), texts  # the request, in words, on the phone

    tap = answer_on(channel, providers, action)
    deliver(tap)

    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    assert runs(what, server, user) == 1
    carried = Action.objects.exclude(pk=action.pk).get(tool=tool)
    assert carried.state == ActionState.DONE and not carried.is_error

    deliver(answer_on(channel, providers, action))  # a second answer
    assert runs(what, server, user) == 1
    assert Action.objects.filter(tool=tool).count() == 2
