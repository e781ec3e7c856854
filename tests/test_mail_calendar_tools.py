"""The calendar and mail tools against real servers on 127.0.0.1: Radicale (CalDAV), Dovecot (IMAP), aiosmtpd
(SMTP), called through the delivery's Toolbox as the model-backed assistant calls them."""

import json
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import caldav
import icalendar
import pytest
from imapclient import IMAPClient

from assistant.models import Action, ActionState
from assistant.tools.toolbox import toolbox_for
from connections import mailboxes, mailcal
from conversations.models import Delivery
from tests.factories import delivery_under_way
from tests.mail_servers import PASSWORD, free_port, imap_announcing_a_huge_literal, silent_server, trickling_server
from tests.test_mail_calendar_connections import SLACK, mailbox_fields

pytestmark = pytest.mark.django_db

ZONE = "America/New_York"


@pytest.fixture
def person(user):
    """A person in New York, with a message whose delivery's first attempt is under way: the tools are called
    inside it, as the delivery engine calls them."""
    user.profile.time_zone = ZONE
    user.profile.save()
    delivery_under_way(user)
    return user


@pytest.fixture
def calendar(person, radicale_server):
    return mailcal.add_calendar(person, radicale_server.url, "ann", PASSWORD)


@pytest.fixture
def mailbox(person, dovecot_server, smtp_server, mail_user):
    return mailcal.add_mailbox(person, mailbox_fields(dovecot_server, smtp_server, mail_user))


def run(person, name: str, arguments: dict, seconds: float = 10, call_id: str = "call_1") -> tuple[str, Action]:
    """One call, as the next call of the attempt (a fresh toolbox reads the account as the test left it)."""
    delivery = Delivery.objects.latest("pk")
    box = toolbox_for(person, delivery, attempt=1)
    box.next_index = Action.objects.filter(delivery=delivery).count()
    result = box.call(call_id, name, json.dumps(arguments), 1, time.monotonic() + seconds)
    return result, Action.objects.latest("pk")


def stored_events(radicale_server) -> list[icalendar.Event]:
    client = caldav.DAVClient(url=radicale_server.url, username="ann", password=PASSWORD)
    found = []
    for item in client.principal().calendars()[0].events():
        found += icalendar.Calendar.from_ical(item.data).walk("VEVENT")
    return found


def deliver(dovecot_server, user: str, subject: str, body: str = "Hello", *, sender="Sam <sam@example.test>", **kw):
    raw = (
        f"From: {sender}\r\nTo: {user}@example.test\r\nSubject: {subject}\r\nDate: Tue, 24 Nov 2026 15:00:00 +0000\r\n"
    )
    dovecot_server.deliver(user, (raw + f"\r\n{body}\r\n").encode(), **kw)


# The toolbox --------------------------------------------------------------------------------------------------------


def test_the_tools_are_offered_only_for_what_is_connected_and_reads_are_marked_read_only(person, calendar):
    box = toolbox_for(person, Delivery.objects.latest("pk"), attempt=1)
    assert {"calendar_list_events", "calendar_create_event", "calendar_delete_event"} <= set(box.tools)
    assert not any(name.startswith("mail_") for name in box.tools)
    assert box.tools["calendar_list_events"].read_only
    assert not box.tools["calendar_create_event"].read_only and not box.tools["calendar_delete_event"].read_only
    schema = box.tools["calendar_create_event"].as_openai()["function"]["parameters"]
    assert schema["required"] == ["summary", "start", "end"] and "rrule" in schema["properties"]


def test_mail_tools_read_only_flags(person, mailbox):
    box = toolbox_for(person, Delivery.objects.latest("pk"), attempt=1)
    flags = {name: tool.read_only for name, tool in box.tools.items() if name.startswith("mail_")}
    assert flags == {"mail_search": True, "mail_read": True, "mail_draft": False, "mail_send": False}


# Calendar -----------------------------------------------------------------------------------------------------------


def test_an_event_is_created_in_the_persons_zone_and_listed_back_in_it(person, calendar, radicale_server):
    result, action = run(
        person,
        "calendar_create_event",
        {"summary": "Lunch with Sam", "start": "2026-11-27T13:00", "end": "2026-11-27T14:00", "location": "Cafe"},
    )
    assert not action.is_error, result
    assert result == "Created the event “Lunch with Sam” at Cafe: Fri 27 Nov, 13:00–14:00."

    [event] = stored_events(radicale_server)
    start = event.decoded("DTSTART")
    assert start == datetime(2026, 11, 27, 13, 0, tzinfo=ZoneInfo(ZONE))
    assert str(event["DTSTART"].params.get("TZID")) == ZONE  # held in the person's zone, not shifted to UTC

    listed, action = run(person, "calendar_list_events", {"start": "2026-11-27", "end": "2026-11-27"})
    answer = json.loads(listed)
    assert answer["timeZone"] == ZONE
    [shown] = answer["events"]
    assert (shown["summary"], shown["start"], shown["end"], shown["location"]) == (
        "Lunch with Sam",
        "2026-11-27T13:00",
        "2026-11-27T14:00",
        "Cafe",
    )
    assert shown["id"] == str(event["UID"]) and "heldInTimeZone" not in shown


def test_a_repeating_event_is_expanded_and_deleted_whole(person, calendar, radicale_server):
    created, action = run(
        person,
        "calendar_create_event",
        {
            "summary": "Standup",
            "start": "2026-11-23T09:00",
            "end": "2026-11-23T09:15",
            "rrule": "FREQ=WEEKLY;BYDAY=MO,WE",
        },
    )
    assert not action.is_error, created
    listed = json.loads(
        run(person, "calendar_list_events", {"start": "2026-11-23T00:00", "end": "2026-12-03T00:00"})[0]
    )
    starts = [event["start"] for event in listed["events"]]
    assert starts == ["2026-11-23T09:00", "2026-11-25T09:00", "2026-11-30T09:00", "2026-12-02T09:00"]
    assert all(event["repeats"] for event in listed["events"])

    deleted, action = run(person, "calendar_delete_event", {"id": listed["events"][0]["id"]})
    assert not action.is_error and "Standup" in deleted
    assert stored_events(radicale_server) == []
    again, action = run(person, "calendar_delete_event", {"id": listed["events"][0]["id"]})
    assert action.is_error and "no event" in again


def test_an_event_held_in_another_zone_is_shown_in_the_persons(person, calendar, radicale_server):
    tokyo = ZoneInfo("Asia/Tokyo")
    event = icalendar.Event()
    event.add("UID", "tokyo-call@example.test")
    event.add("SUMMARY", "Call with Tokyo")
    event.add("DTSTART", datetime(2026, 11, 28, 9, 0, tzinfo=tokyo))
    event.add("DTEND", datetime(2026, 11, 28, 10, 0, tzinfo=tokyo))
    cal = icalendar.Calendar()
    cal.add("PRODID", "-//test//EN")
    cal.add("VERSION", "2.0")
    cal.add_component(event)
    cal.add_missing_timezones()
    client = caldav.DAVClient(url=radicale_server.url, username="ann", password=PASSWORD)
    client.principal().calendars()[0].add_event(cal.to_ical().decode())

    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-11-27", "end": "2026-11-27"})[0])
    [shown] = listed["events"]
    # 09:00 in Tokyo on the 28th is 19:00 on the 27th in New York
    assert (shown["start"], shown["end"], shown["heldInTimeZone"]) == (
        "2026-11-27T19:00",
        "2026-11-27T20:00",
        "Asia/Tokyo",
    )


def test_malformed_icalendar_on_the_server_is_skipped_not_fatal(person, calendar, radicale_server):
    run(
        person, "calendar_create_event", {"summary": "Good one", "start": "2026-11-27T10:00", "end": "2026-11-27T11:00"}
    )
    # Radicale refuses malformed data over CalDAV; a file put beside its events (as another client or a sync
    # might leave it) is served as it is.
    folder = radicale_server.calendar_dir("ann", "personal")
    (folder / "broken.ics").write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//EN\r\nBEGIN:VEVENT\r\nUID:broken\r\n"
        "DTSTART:2026-11-27 not a time\r\nRRULE:FREQ=SOMETIMES\r\nSUMMARY:Broken\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    result, action = run(person, "calendar_list_events", {"start": "2026-11-27", "end": "2026-11-27"})
    assert not action.is_error, result
    answer = json.loads(result)
    assert [event["summary"] for event in answer["events"]] == ["Good one"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"summary": "x", "start": "tomorrow at 3", "end": "2026-11-27T14:00"}, "not an ISO 8601 time"),
        ({"summary": "x", "start": "2026-11-27T14:00", "end": "2026-11-27T13:00"}, "end must be after start"),
        ({"summary": "x", "start": "2026-11-27T13:00", "end": "2026-11-27T14:00", "rrule": "FREQ=SOMETIMES"}, "RRULE"),
        ({"summary": "", "start": "2026-11-27T13:00", "end": "2026-11-27T14:00"}, "summary is required"),
        ({"summary": "x", "start": "2026-11-27", "end": "2026-11-27T14:00"}, "both be times, or both be dates"),
        ({"summary": "x" * 300, "start": "2026-11-27T13:00", "end": "2026-11-27T14:00"}, "at most 255"),
    ],
)
def test_bad_event_arguments_go_back_to_the_model_as_text(person, calendar, radicale_server, arguments, expected):
    result, action = run(person, "calendar_create_event", arguments)
    assert action.is_error and expected in result
    assert stored_events(radicale_server) == []


def test_a_calendar_whose_server_hangs_answers_within_the_attempts_deadline(person, calendar):
    with silent_server() as port:
        calendar.server_url = calendar.calendar_url = f"http://127.0.0.1:{port}/ann/personal/"
        calendar.save()
        started = time.monotonic()
        result, action = run(person, "calendar_list_events", {"start": "2026-11-27", "end": "2026-11-28"}, seconds=1.5)
    assert action.is_error and "did not answer in time" in result
    assert time.monotonic() - started < 1.5 + SLACK


# Mail ---------------------------------------------------------------------------------------------------------------


def test_search_gives_headers_only_and_filters_on_the_server(person, mailbox, dovecot_server, mail_user):
    deliver(dovecot_server, mail_user, "Lunch on Friday?", "The secret body text")
    deliver(dovecot_server, mail_user, "Invoice", sender="Shop <shop@example.test>", seen=True)
    deliver(dovecot_server, mail_user, "Re: lunch", sender="Sam <sam@example.test>", seen=True)

    result, action = run(person, "mail_search", {"unseen": True})
    answer = json.loads(result)
    assert not action.is_error
    assert [m["subject"] for m in answer["messages"]] == ["Lunch on Friday?"]
    assert answer["messages"][0]["from"] == "Sam <sam@example.test>" and answer["messages"][0]["unread"]
    assert "secret body" not in result

    by_sender = json.loads(run(person, "mail_search", {"from": "sam@example.test"})[0])
    assert [m["subject"] for m in by_sender["messages"]] == ["Re: lunch", "Lunch on Friday?"]  # newest first
    assert run(person, "mail_search", {"text": "nothing like this"})[0] == "No message in the inbox matches."


def test_read_gives_the_plain_text_and_lists_attachments_without_fetching_them(
    person, mailbox, dovecot_server, mail_user
):
    big = "A" * (20 * 1024 * 1024 // 76 * 57)  # about 20 MB once base64-encoded
    raw = (
        f"From: Sam <sam@example.test>\r\nTo: {mail_user}@example.test\r\nSubject: The slides\r\n"
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n"
        "--b1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
        "Here are the slides, caf=C3=A9 at 3.\r\n"
        "--b1\r\nContent-Type: application/pdf; name=slides.pdf\r\nContent-Disposition: attachment; "
        "filename=slides.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    )
    import base64

    encoded = base64.encodebytes(big.encode())
    dovecot_server.deliver(mail_user, raw.encode() + encoded + b"\r\n--b1--\r\n")
    uid = json.loads(run(person, "mail_search", {})[0])["messages"][0]["id"]

    before = _bytes_sent(dovecot_server, mail_user)
    result, action = run(person, "mail_read", {"id": uid})
    assert not action.is_error, result
    assert "Here are the slides, café at 3." in result
    assert "slides.pdf (application/pdf" in result and "not opened" in result
    assert "AAAA" not in result
    assert _bytes_sent(dovecot_server, mail_user) - before < 1_000_000  # the 20 MB part never crossed the wire


def _bytes_sent(dovecot_server, user: str) -> int:
    """What Dovecot reports having sent to the user's sessions (its log's out=… on each logout)."""
    import re

    log = (dovecot_server.root / "dovecot.log").read_text()
    return sum(int(n) for n in re.findall(rf"imap\({user}\).*? out=(\d+)", log))


def test_html_only_mail_is_read_as_text(person, mailbox, dovecot_server, mail_user):
    raw = (
        f"From: shop@example.test\r\nTo: {mail_user}@example.test\r\nSubject: Order\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/html; charset=utf-8\r\n\r\n"
        "<html><head><style>p { color: red }</style><title>t</title></head><body><p>Your <b>order</b> shipped.</p>"
        "<script>steal()</script><ul><li>Boots</li><li>Hat</li></ul></body></html>\r\n"
    )
    dovecot_server.deliver(mail_user, raw.encode())
    uid = json.loads(run(person, "mail_search", {})[0])["messages"][0]["id"]
    result, _ = run(person, "mail_read", {"id": uid})
    assert "Your order shipped." in result and "Boots\nHat" in result and "converted from HTML" in result
    assert "steal" not in result and "color" not in result and "<p>" not in result


@pytest.mark.slow
def test_a_search_of_a_huge_mailbox_stays_bounded(person, dovecot_server, smtp_server, mail_user):
    box = dovecot_server.maildir(mail_user)
    for sub in ("cur", "new", "tmp"):
        (box / sub).mkdir(parents=True, exist_ok=True)
    for n in range(10_000):
        (box / "cur" / f"{n}.bulk:2,{'S' if n % 10 else ''}").write_bytes(
            f"From: n{n % 50}@example.test\r\nSubject: message {n}\r\n\r\nbody {n}\r\n".encode()
        )
    dovecot_server.own(box)
    mailcal.add_mailbox(person, mailbox_fields(dovecot_server, smtp_server, mail_user))

    result, action = run(person, "mail_search", {"unseen": True}, seconds=20)
    answer = json.loads(result)
    assert not action.is_error
    assert answer["matched"] == 1000 and len(answer["messages"]) == mailboxes.MAX_RESULTS
    assert "narrow the search" in answer["note"]
    assert len(result) < 8000


def test_a_draft_is_saved_in_drafts_and_nothing_is_sent(person, mailbox, dovecot_server, smtp_server, mail_user):
    result, action = run(person, "mail_draft", {"to": "sam@example.test", "subject": "Lunch", "body": "Friday at 1?"})
    assert not action.is_error and "Drafts" in result
    with IMAPClient("127.0.0.1", port=dovecot_server.port, ssl=False) as imap:
        imap.login(mail_user, PASSWORD)
        imap.select_folder("Drafts", readonly=True)
        [uid] = imap.search()
        data = imap.fetch([uid], ["FLAGS", "BODY.PEEK[]"])[uid]
    assert b"\\Draft" in data[b"FLAGS"]
    assert b"Subject: Lunch" in data[b"BODY[]"] and b"Friday at 1?" in data[b"BODY[]"]
    assert smtp_server.received == []


def test_mail_send_asks_the_person_even_for_their_own_words(person, mailbox, smtp_server):
    """Mail leaves for good: every one waits for the person's yes, whoever asked (assistant/approval/rule.py)."""
    result, action = run(person, "mail_send", {"to": "sam@example.test", "subject": "Hi", "body": "Hello"})
    assert action.state == ActionState.AWAITING_APPROVAL and "must approve it first" in result
    assert action.approval_message.text.startswith("Approve this? Send an email to sam@example.test, subject “Hi”.")
    assert smtp_server.received == []


@pytest.mark.parametrize("call_id", ["approved-1", "approved-999999"])
def test_a_call_id_the_model_makes_up_cannot_approve_a_sending(person, mailbox, dovecot_server, smtp_server, call_id):
    """Call ids come from the model: one shaped like the ids of approved calls still only asks."""
    result, action = run(
        person, "mail_send", {"to": "sam@example.test", "subject": "Hi", "body": "Hello"}, call_id=call_id
    )
    assert action.tool_call_id == call_id and action.state == ActionState.AWAITING_APPROVAL
    assert "must approve it first" in result
    assert smtp_server.received == []


def test_sending_through_smtp_reaches_the_server(person, mailbox, smtp_server):
    """What mail_send will call once the person can approve it: the message arrives at aiosmtpd."""
    server = mailcal.mail_server(mailbox)
    mailboxes.send(server, mailboxes.compose(server, "Sam <sam@example.test>", "Hi", "Hello Sam"), seconds=5)
    [received] = smtp_server.received
    assert (received["Subject"], received["To"], received["From"]) == ("Hi", "sam@example.test", mailbox.address)
    assert smtp_server.envelopes == [(mailbox.address, ["sam@example.test"])]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"to": "not an address", "subject": "x", "body": "y"}, "not one"),
        ({"to": "a@example.test", "subject": "x\r\nBcc: all@example.test", "body": "y"}, "one line"),
        ({"to": "a@example.test\nBcc: all@example.test", "subject": "x", "body": "y"}, "one line"),
        # What Python's email package also ends a header line on: a logged traceback instead of a refusal before.
        ({"to": "a@example.test", "subject": "x\u2028Bcc: all@example.test", "body": "y"}, "one line"),
        ({"to": "a@example.test", "subject": "x\x85Bcc: all@example.test", "body": "y"}, "one line"),
        ({"to": "a@example.test", "subject": "x\x0bBcc: all@example.test", "body": "y"}, "one line"),
        ({"to": "a@example.test", "subject": "x\x0cBcc: all@example.test", "body": "y"}, "one line"),
        ({"to": "a@example.test\u2028Bcc: all@example.test", "subject": "x", "body": "y"}, "one line"),
        ({"to": "a@example.test", "subject": "x", "body": "y" * 15_000}, "at most"),
    ],
)
def test_bad_mail_arguments_are_refused(person, mailbox, smtp_server, arguments, expected):
    result, action = run(person, "mail_draft", arguments)
    assert action.is_error and expected in result


def test_a_wrong_password_or_a_server_that_is_down_or_hangs_is_told_to_the_model(person, mailbox):
    mailbox.password_encrypted = mailcal.crypto.encrypt("wrong")
    mailbox.save()
    result, action = run(person, "mail_search", {})
    assert action.is_error and "refused the username or password" in result

    mailbox.imap_port = free_port()
    mailbox.save()
    result, action = run(person, "mail_search", {})
    assert action.is_error and "Could not connect" in result

    with silent_server() as port:
        mailbox.imap_port = port
        mailbox.save()
        started = time.monotonic()
        result, action = run(person, "mail_search", {}, seconds=1.5)
    assert action.is_error and "did not answer in time" in result
    assert time.monotonic() - started < 1.5 + SLACK
    assert "wrong" not in result and PASSWORD not in result


def test_a_server_that_answers_a_byte_at_a_time_is_cut_off_at_the_deadline(person, mailbox):
    """Each byte comes well within a socket timeout; the bound (ops/bounded.py) ends the exchange at the call's
    deadline."""
    with trickling_server() as port:
        mailbox.imap_port = port
        mailbox.save()
        started = time.monotonic()
        result, action = run(person, "mail_search", {}, seconds=1.5)
        took = time.monotonic() - started
    assert action.is_error and "did not answer in time" in result
    assert took < 1.5 + SLACK


def test_search_since_a_local_date(person, mailbox, dovecot_server, mail_user):
    old = "From: a@example.test\r\nSubject: Old\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\n\r\nx\r\n"
    new = "From: a@example.test\r\nSubject: New\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\n\r\nx\r\n"
    for raw, when in ((old, "2026-11-02 10:00"), (new, "2026-11-24 10:00")):
        dovecot_server.deliver(mail_user, raw.encode(), received=when)
    answer = json.loads(run(person, "mail_search", {"since": "2026-11-20"})[0])
    assert [m["subject"] for m in answer["messages"]] == ["New"]
    refused, action = run(person, "mail_search", {"since": "last week"})
    assert action.is_error and "ISO 8601" in refused


def test_a_server_that_answers_a_bounded_fetch_with_50_mb_is_not_read(person, mailbox):
    with imap_announcing_a_huge_literal() as port:
        mailbox.imap_port = port
        mailbox.save()
        started = time.monotonic()
        result, action = run(person, "mail_read", {"id": "1"})
    assert action.is_error and "sent 50,000,000 bytes" in result and "nothing was read" in result
    assert time.monotonic() - started < 10  # refused on the announcement, before the call's 10 s were up
