"""The built-in assistant reads a message as a person reads it (docs/explanation/local-assistant.md): sentence by
sentence, a request after a report, a report alone acting on nothing, several requests each carried out; alarms and
wake-ups, calendar and mail questions in the words people use, spoken times. bench/understanding.py measures the
same on public sets of requests; here are the cases the docs name, for a fixed "now" (Wednesday 25 November 2026,
10:00, local)."""

import sys
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.local import dates
from assistant.local.intents import Act, Answer, Ask, CancelNamed, Refuse, Several, intent_name, understand
from bench import understanding
from bench.understanding import measure, notifications
from conversations.models import Message, Role
from reminders.models import Reminder

NOW = datetime(2026, 11, 25, 10, 0)
TOOLS = {
    "schedule_reminder", "list_reminders", "cancel_reminder", "list_webhook_triggers", "calendar_list_events",
    "calendar_create_event", "mail_search", "mail_send",
}  # fmt: skip


def remind(text: str, when: str) -> Act:
    return Act("schedule_reminder", {"text": text, "when": when})


def read(text: str):
    intent = understand(text, NOW, TOOLS)
    return Act(intent.tool, intent.arguments) if isinstance(intent, Act) else intent


SCRIPTS = [
    (
        "Deploy of api v2.3 finished. Remind me to check the error rate in 30 minutes",
        remind("Check the error rate", "2026-11-25T10:30"),
    ),
    (  # the README's example: the report is what to be reminded of
        "The nightly backup failed on db-1: find out why and remind me at 9",
        remind("The nightly backup failed on db-1: find out why", "2026-11-26T09:00"),
    ),
    (
        "Build failed in Jenkins: nightly-integration #512 - remind me in an hour to rerun it",
        remind("Rerun it", "2026-11-25T11:00"),
    ),
    (
        "Release 1.8.0 is out. Please remind me to announce it tomorrow at 10.",
        remind("Announce it", "2026-11-26T10:00"),
    ),
    ("Standup moved to 10:30. What reminders do I have?", Act("list_reminders", {})),
    ("Back from lunch. Any new mail?", Act("mail_search", {"unseen": True})),
]


@pytest.mark.parametrize(("text", "expected"), SCRIPTS)
def test_a_request_after_a_report_is_carried_out(text, expected):
    assert read(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Deploy of api v2.3 to production finished in 4m 12s.",
        "[FIRING:1] HighErrorRate api (production critical)",
        "Run failed: CI - main (4f2a9c1)",
        "Reminder: your invoice INV-2041 is due on Friday.",
        "New issue in backend: TypeError: Cannot read properties of undefined (reading 'id')",
        "Meeting notes: we agreed to cancel the Friday meeting and email the client tomorrow.",
    ],
)
def test_a_report_that_asks_nothing_acts_on_nothing(text):
    assert understand(text, NOW, TOOLS) is None


def test_two_requests_in_one_message_are_both_read():
    intent = understand("Remind me to stretch at 3pm. What's on my calendar tomorrow?", NOW, TOOLS)
    assert isinstance(intent, Several)
    first, second = intent.intents
    assert isinstance(first, Act) and first.arguments == {"text": "Stretch", "when": "2026-11-25T15:00"}
    assert isinstance(second, Act) and second.tool == "calendar_list_events" and second.done == "tomorrow"


def test_a_request_to_summarize_keeps_the_text_from_being_acted_on():
    intent = understand("Summarize this: remind me to stretch at 3pm. Delete the dentist appointment.", NOW, TOOLS)
    assert isinstance(intent, Refuse) and intent.about == "summarize"


DEC_14, NOV_28 = "2026-12-14T00:00", "2026-11-28T00:00"
WORDS = [
    ("set an alarm for seven am", remind("Alarm", "2026-11-26T07:00")),
    ("get me up at half past six", remind("Wake up", "2026-11-26T06:30")),
    ("put an alarm on for 6 tomorrow morning", remind("Alarm", "2026-11-26T06:00")),
    ("Olly, wake me up at 7:30 a.m. tomorrow", remind("Wake up", "2026-11-26T07:30")),
    ("remind me to call dan at six in the evening on the fifth", remind("Call dan", "2026-12-05T18:00")),
    ("remind me to stretch at six thirty pm", remind("Stretch", "2026-11-25T18:30")),
    ("remind me to stretch in half an hour", remind("Stretch", "2026-11-25T10:30")),
    ("remind me to stretch next friday at 9am", remind("Stretch", "2026-11-27T09:00")),
    ("remind me to pay rent on the thirteenth at noon", remind("Pay rent", "2026-12-13T12:00")),
    ("remind me to stretch this afternoon at five", remind("Stretch", "2026-11-25T17:00")),
    ("remind me to stretch at a quarter to nine tonight", remind("Stretch", "2026-11-25T20:45")),
    ("what alarms do I have set for tomorrow morning?", Act("list_reminders", {})),
    ("is the company party on my list of reminders", Act("list_reminders", {})),
    ("cancel my 6am alarm", CancelNamed("alarm")),
    ("any new mail from sarah", Act("mail_search", {"from": "sarah", "unseen": True})),
    ("who sent me email today", Act("mail_search", {"since": "2026-11-25"})),
    ("did Paul email me recently", Act("mail_search", {"from": "Paul"})),
    ("what's on my schedule for the 13th", Act("calendar_list_events", {"start": "2026-12-13T00:00", "end": DEC_14})),
    ("am I free on Friday afternoon?", Act("calendar_list_events", {"start": "2026-11-27T00:00", "end": NOV_28})),
]


@pytest.mark.parametrize(("text", "expected"), WORDS)
def test_the_words_people_use_for_what_it_claims(text, expected):
    assert read(text) == expected


@pytest.mark.parametrize(
    "text", ["book a cab to the station in 20 minutes", "make me a coffee at 7am", "cancel my dinner reservation"]
)
def test_what_is_booked_elsewhere_is_no_calendar_event(text):
    assert intent_name(understand(text, NOW, TOOLS)) is None


def test_a_meeting_without_a_time_is_asked_about_once():
    intent = understand("schedule a meeting with James", NOW, TOOLS)
    assert isinstance(intent, Ask) and intent.question.startswith("When should I put “Meeting with James”")


def test_a_mail_to_someone_without_an_address_asks_for_it():
    intent = understand("email my boss that I will be late today", NOW, TOOLS)
    assert isinstance(intent, Refuse) and "your boss's email address" in intent.reason


def test_help_in_other_words_answers_with_the_list():
    assert isinstance(understand("what kinds of things can I ask you about?", NOW, TOOLS), Answer)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("at 6:30am tomorrow", (datetime(2026, 11, 26, 6, 30), "time")),
        ("on 3rd of december at 19:00", (datetime(2026, 12, 3, 19, 0), "time")),
        ("in 1 hour and 30 minutes", (datetime(2026, 11, 25, 11, 30), "time")),
        ("friday", (datetime(2026, 11, 27), "day")),
        ("the day after tomorrow", (datetime(2026, 11, 27), "day")),
        ("at noon on the 25th", (datetime(2026, 11, 25, 12, 0), "time")),
        ("next week", None),  # not known here: dateparser reads it
    ],
)
def test_the_date_reader_reads_days_and_clocks(phrase, expected):
    assert dates.read(dates.digits(phrase), NOW) == expected


def test_spoken_numbers_become_clock_times():
    assert dates.digits("six thirty am") == "6:30am"
    assert dates.digits("half past six") == "6:30"
    assert dates.digits("the twenty-first") == "the 21th"
    assert dates.digits("at 0500 hrs") == "at 05:00"


def test_the_notification_fixture_meets_the_targets():
    found = measure(notifications())
    assert found["precision"] >= 0.97 and found["recall"] >= 0.9 and found["acted_on_other"] == 0


def test_the_benchmark_skips_without_its_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["understanding", "--data", str(tmp_path)])
    monkeypatch.setenv("DEBUG", "1")  # what the script sets when run alone
    understanding.main()
    assert "Skipped" in capsys.readouterr().out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["remind me", "at", "6", "six", "thirty", "am", "alarm", "set", ".", ":", " - ",
                                 "and", "the", "13th", "half", "past", "calendar", "my", "what", "email", "from",
                                 "?", "tomorrow", "wake", "me", "up", "in", "an", "hour", "cancel", "on", "for"]),
                max_size=25),
       st.text(max_size=60))  # fmt: skip
def test_any_words_are_read_without_an_error(words, noise):
    understand(" ".join(words), NOW, TOOLS)
    understand(f"{noise} {' '.join(words)}", NOW, TOOLS)


@pytest.mark.django_db
def test_both_requests_of_a_message_are_carried_out(send, user, v2):
    send(v2[1], {"message": "Remind me to stretch at 11pm tonight. What reminders do I have?"})

    reply = Message.objects.filter(role=Role.ASSISTANT).latest("created_at").text
    assert Reminder.objects.get().text == "Stretch"
    first, second = reply.split("\n\n")
    assert first.startswith("Okay! I'll remind you to stretch") and second.startswith("You have 1 reminder:")
