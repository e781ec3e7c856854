"""What the built-in assistant makes of a message, for a fixed "now" (Wednesday 25 November 2026, 10:00 in Paris,
the person's zone): the tool call and its arguments, the question it asks back, or its refusal. No database: the
reading is a pure function; tests/test_local_assistant.py runs the calls through the Toolbox."""

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.local.intents import ANSWER_HINT, Act, Ask, CancelNamed, Refuse, understand

NOW = datetime(2026, 11, 25, 10, 0)  # local, naive: a Wednesday
BUILT_IN = {"schedule_reminder", "list_reminders", "cancel_reminder", "list_webhook_triggers"}
CONNECTED = BUILT_IN | {"calendar_list_events", "calendar_create_event", "mail_search", "mail_send"}
WEEKDAYS = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"


def remind(text: str, when: str, rrule: str = "") -> Act:
    return Act("schedule_reminder", {"text": text, "when": when} | ({"rrule": rrule} if rrule else {}))


def ask(fragment: str) -> Ask:
    return Ask(fragment)


def refuse(fragment: str) -> Refuse:
    return Refuse(fragment)


PHRASINGS = [
    # reminders, once
    ("Remind me to stretch at 3pm", remind("Stretch", "2026-11-25T15:00")),
    ("remind me to stretch in 20 minutes", remind("Stretch", "2026-11-25T10:20")),
    ("Remind me to call my mom tomorrow at noon", remind("Call my mom", "2026-11-26T12:00")),
    ("remind me at 3pm to stretch", remind("Stretch", "2026-11-25T15:00")),
    ("In 20 minutes, remind me to check the oven", remind("Check the oven", "2026-11-25T10:20")),
    ("set a reminder for 3pm to stretch", remind("Stretch", "2026-11-25T15:00")),
    ("Please remind me to water the plants at 6pm, thanks!", remind("Water the plants", "2026-11-25T18:00")),
    ("remind me to put the washing on at 3pm", remind("Put the washing on", "2026-11-25T15:00")),
    ("remind me to log in at 9", remind("Log in", "2026-11-26T09:00")),  # 9 without am/pm: the morning
    ("remind me about the dentist tomorrow at 9:30am", remind("The dentist", "2026-11-26T09:30")),
    ("Remind me in an hour to take the pizza out", remind("Take the pizza out", "2026-11-25T11:00")),
    ("remind me to stretch in half an hour", remind("Stretch", "2026-11-25T10:30")),
    ("remind me to go to the gym at 6 in the evening", remind("Go to the gym", "2026-11-25T18:00")),
    ("remind me to stretch at 7 tomorrow morning", remind("Stretch", "2026-11-26T07:00")),
    ("remind me to stretch tonight at 8", remind("Stretch", "2026-11-25T20:00")),
    ("remind me to stretch on Dec 3 at 5pm", remind("Stretch", "2026-12-03T17:00")),
    ("remind me to stretch at 15:30", remind("Stretch", "2026-11-25T15:30")),
    ("remind me that the meeting moved at 4pm", remind("The meeting moved", "2026-11-25T16:00")),
    ("Remind me to send the report on Friday at 1pm", remind("Send the report", "2026-11-27T13:00")),
    ("wake me up at 7", remind("Wake up", "2026-11-26T07:00")),
    ("remind me to stretch at 9am", remind("Stretch", "2026-11-26T09:00")),  # 9am has passed today: tomorrow
    ("remind me tomorrow to call the bank at 10am", remind("Call the bank", "2026-11-26T10:00")),  # now's hour
    ("remind me to stretch around 4pm", remind("Stretch", "2026-11-25T16:00")),
    (
        "remind me to stretch every weekday at 9 except Friday",
        remind("Stretch", "2026-11-26T09:00", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH"),
    ),
    (
        "remind me each Friday to submit the timesheet at 4pm",
        remind("Submit the timesheet", "2026-11-27T16:00", "FREQ=WEEKLY;BYDAY=FR"),
    ),
    # reminders, repeating
    ("remind me to stand up every weekday at 9", remind("Stand up", "2026-11-26T09:00", WEEKDAYS)),
    (
        "Remind me every Monday at 8am to take out the bins",
        remind("Take out the bins", "2026-11-30T08:00", "FREQ=WEEKLY;BYDAY=MO"),
    ),
    ("Remind me to stretch at 3pm every weekday.", remind("Stretch", "2026-11-25T15:00", WEEKDAYS)),
    ("remind me to take my pills every evening at 8", remind("Take my pills", "2026-11-25T20:00", "FREQ=DAILY")),
    (
        "remind me to water the plants every other day at 8",
        remind("Water the plants", "2026-11-26T08:00", "FREQ=DAILY;INTERVAL=2"),
    ),
    (
        "remind me on mondays and wednesdays at 6pm to go running",
        remind("Go running", "2026-11-25T18:00", "FREQ=WEEKLY;BYDAY=MO,WE"),
    ),
    ("set a reminder: team standup every weekday at 9:15", remind("Team standup", "2026-11-26T09:15", WEEKDAYS)),
    (
        "remind me to pay rent every month on the 1st at 9am",
        remind("Pay rent", "2026-12-01T09:00", "FREQ=MONTHLY;BYMONTHDAY=1"),
    ),
    ("remind me to drink water every 2 hours", remind("Drink water", "2026-11-25T11:00", "FREQ=HOURLY;INTERVAL=2")),
    ("remind me to stretch daily at noon", remind("Stretch", "2026-11-25T12:00", "FREQ=DAILY")),
    # asked back
    ("remind me to stretch next Friday", ask("What time on Fri 27 Nov should I remind you to stretch?")),
    ("remind me to stretch at 3", ask("Did you mean 3am or 3pm?")),
    ("remind me to go to the gym at 6", ask("Did you mean 6am or 6pm?")),
    ("remind me to stretch", ask("When should I remind you to stretch?")),
    ("remind me on Friday", ask("What should I remind you of?")),
    ("remind me tomorrow to call the bank", ask("What time tomorrow should I remind you to call the bank?")),
    ("remind me to stretch every morning", ask("What time every day should I remind you to stretch?")),
    (
        "remind me to renew my passport next week",
        ask("On which day, and at what time, should I remind you to renew your passport?"),
    ),
    ("remind me to leave at 25:00", ask("I could not read the time")),
    ("add lunch with Sam on Friday", ask("What time on Fri 27 Nov should I put “Lunch with Sam” in your calendar?")),
    # refused
    ("remind me to stretch today at 9am", refuse("That time has passed: it is 10:00 today where you are.")),
    ("hey can you remind me to stretch every 5 minutes", refuse("Reminders repeat at most every hour.")),
    ("remind me to stretch at 9 except Friday", refuse("“Except” goes with a repetition")),
    ("send an email to Bob", refuse("I need Bob's email address")),
    ("forward my mail to bob@example.com", refuse("I can't forward, answer or file mail")),
    ("delete the dentist appointment", refuse("I can't change or remove calendar events")),
    ("delete my webhook", refuse("I can't create or remove webhooks myself")),
    # reminders listed and cancelled
    ("What reminders do I have?", Act("list_reminders", {})),
    ("do I have any reminders", Act("list_reminders", {})),
    ("reminders", Act("list_reminders", {})),
    ("cancel the stretch reminder", CancelNamed("stretch")),
    ("cancel my reminder to stretch", CancelNamed("stretch")),
    ("cancel the reminder to stretch at 3pm", CancelNamed("stretch")),
    ("delete reminder rem_Ab12Cd34Ef56Gh78", CancelNamed("rem_Ab12Cd34Ef56Gh78")),
    ("cancel all my reminders", CancelNamed("")),  # asked which, one at a time
    # webhooks, calendar, mail
    ("list my webhooks", Act("list_webhook_triggers", {})),
    ("show my webhook triggers", Act("list_webhook_triggers", {})),
    (
        "what's on my calendar today",
        Act("calendar_list_events", {"start": "2026-11-25T00:00", "end": "2026-11-26T00:00"}),
    ),
    (
        "What's on my calendar tomorrow?",
        Act("calendar_list_events", {"start": "2026-11-26T00:00", "end": "2026-11-27T00:00"}),
    ),
    ("What do I have on Friday", Act("calendar_list_events", {"start": "2026-11-27T00:00", "end": "2026-11-28T00:00"})),
    (
        "add lunch with Sam on Friday at 1pm",
        Act("calendar_create_event",
            {"summary": "Lunch with Sam", "start": "2026-11-27T13:00", "end": "2026-11-27T14:00"},
        ),
    ),
    (
        "add a meeting with Bob tomorrow at 3pm for 30 minutes",
        Act("calendar_create_event",
            {"summary": "Meeting with Bob", "start": "2026-11-26T15:00", "end": "2026-11-26T15:30"},
        ),
    ),
    (
        "what meetings do I have today",
        Act("calendar_list_events", {"start": "2026-11-25T00:00", "end": "2026-11-26T00:00"}),
    ),
    (
        "Put dentist on my calendar tomorrow at 9:30",
        Act("calendar_create_event", {"summary": "Dentist", "start": "2026-11-26T09:30", "end": "2026-11-26T10:30"}),
    ),
    ("book the retro for Friday", ask("What time on Fri 27 Nov should I put “Retro” in your calendar?")),
    ("show me the events of the deploy", None),  # not the calendar: no "my", no day
    ("show my unread mail", Act("mail_search", {"unseen": True})),
    ("any new emails?", Act("mail_search", {"unseen": True})),
    # not understood: the reply says what it can do
    ("what is the weather", None),
    ("Book a table for two", None),
    ("Add milk", None),
    ("", None),
]  # fmt: skip


def same(found, expected) -> bool:
    if isinstance(expected, Act):
        return isinstance(found, Act) and (found.tool, found.arguments) == (expected.tool, expected.arguments)
    if isinstance(expected, Ask):
        return isinstance(found, Ask) and expected.question in found.question
    if isinstance(expected, Refuse):
        return isinstance(found, Refuse) and expected.reason in found.reason
    return found == expected


@pytest.mark.parametrize(("text", "expected"), PHRASINGS, ids=[text or "(empty)" for text, _ in PHRASINGS])
def test_each_phrasing_becomes_its_action(text, expected):
    found = understand(text, NOW, CONNECTED)
    assert same(found, expected), found


def test_the_table_is_long_enough_and_has_questions_and_refusals():
    kinds = [type(expected) for _, expected in PHRASINGS]
    assert len(PHRASINGS) >= 40
    assert kinds.count(Ask) >= 5 and kinds.count(Refuse) >= 5


def test_every_question_about_a_time_says_a_time_is_enough():
    for text, expected in PHRASINGS:
        if isinstance(expected, Ask) and "remind you of" not in expected.question:
            assert understand(text, NOW, CONNECTED).question.endswith(ANSWER_HINT), text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("what's on my calendar today", "No calendar is connected"),
        ("add lunch with Sam on Friday at 1pm", "No calendar is connected"),
        ("show my unread mail", "No mailbox is connected"),
    ],
)
def test_without_a_connection_it_says_what_to_connect(text, reason):
    found = understand(text, NOW, BUILT_IN)
    assert isinstance(found, Refuse) and reason in found.reason


@pytest.mark.parametrize(
    ("earlier", "answer", "expected"),
    [
        ("remind me to stretch next Friday", "9am", remind("Stretch", "2026-11-27T09:00")),
        ("remind me to stretch at 3", "pm", remind("Stretch", "2026-11-25T15:00")),
        ("remind me to stretch at 3", "3pm", remind("Stretch", "2026-11-25T15:00")),
        ("remind me to stretch", "in 20 minutes", remind("Stretch", "2026-11-25T10:20")),
        ("remind me to stretch every morning", "at 7:30", remind("Stretch", "2026-11-26T07:30", "FREQ=DAILY")),
        ("remind me to stretch at 3", "Tell me a joke", None),  # not an answer: read on its own
        (
            "add lunch with Sam on Friday",
            "1pm",
            Act(
                "calendar_create_event",
                {"summary": "Lunch with Sam", "start": "2026-11-27T13:00", "end": "2026-11-27T14:00"},
            ),
        ),
    ],
)
def test_an_answer_to_the_question_completes_the_earlier_request(earlier, answer, expected):
    assert same(understand(answer, NOW, CONNECTED, earlier=earlier), expected)


def test_it_confirms_in_words_with_the_day_and_the_hour():
    assert (
        understand("Remind me to stretch at 3pm", NOW, BUILT_IN).done
        == "Okay! I'll remind you to stretch today at 15:00."
    )
    assert understand("remind me to call my mom tomorrow at noon", NOW, BUILT_IN).done == (
        "Okay! I'll remind you to call your mom tomorrow at 12:00."
    )
    assert understand("remind me to stand up every weekday at 9", NOW, BUILT_IN).done == (
        "Okay! I'll remind you to stand up every weekday at 09:00, starting tomorrow."
    )


def test_now_and_the_zone_decide_the_day():
    late = datetime(2026, 11, 25, 16, 0)
    assert understand("Remind me to stretch at 3pm", late, BUILT_IN).arguments["when"] == "2026-11-26T15:00"
    assert understand("remind me to stretch today at 3pm", late, BUILT_IN) == Refuse(
        "That time has passed: it is 16:00 today where you are."
    )


TIME_WORDS = ["at", "on", "in", "every", "3", "9", "3pm", "15:30", "tomorrow", "next", "friday", "weekday", "pm"]
REQUEST_WORDS = ["remind", "me", "to", "stretch", "cancel", "the", "reminder", "add", "lunch", "what's", "calendar"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(TIME_WORDS + REQUEST_WORDS) | st.text(max_size=12), max_size=40).map(" ".join),
    st.one_of(st.none(), st.text(max_size=60)),
)
def test_any_text_is_read_without_an_error(text, earlier):
    found = understand(text, NOW, CONNECTED, earlier=earlier)
    assert found is None or isinstance(found, (Act, Ask, Refuse, CancelNamed))
    if isinstance(found, Act) and found.tool == "schedule_reminder":
        assert found.arguments["text"] and datetime.fromisoformat(found.arguments["when"]) >= NOW


def test_a_long_text_is_not_parsed_as_a_request():
    assert understand("remind me to stretch " + "at " * 300 + "3pm", NOW, CONNECTED) is None
