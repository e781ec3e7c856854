"""The default assistant backend acts: messages sent through the API become tool calls through the Toolbox (recorded
as Actions, shown under the reply and on the receipt), in the person's time zone; it asks back when a time is
unclear, says plainly what it cannot do, and a reminder set by a message fires through the task worker."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from assistant.backends import local
from assistant.conversation import build_request
from assistant.models import Action
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from ingestion.hotpath.recording import record_user_message
from keys.models import Generation
from reminders import services as reminders
from reminders.models import Reminder, ReminderStatus
from tests.conftest import CURRENT, LEGACY, fixture_body, post
from tests.factories import make_key
from triggers import services as triggers

pytestmark = pytest.mark.django_db

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def person(user):
    user.profile.time_zone = "Europe/Paris"
    user.profile.save()
    return user


def reply_text() -> str:
    return Message.objects.filter(role=Role.ASSISTANT).latest("created_at").text


def actions() -> list[tuple[str, dict, bool]]:
    return [(action.tool, action.arguments, action.is_error) for action in Action.objects.order_by("pk")]


def test_remind_me_in_20_minutes_schedules_a_reminder_and_says_so(send, person, v2):
    before = timezone.now()
    response = send(v2[1], {"message": "Remind me to stretch in 20 minutes"})

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.backend) == (DeliveryStatus.DELIVERED, "local")
    reminder = Reminder.objects.get()
    assert (reminder.owner, reminder.text, reminder.time_zone) == (person, "Stretch", "Europe/Paris")
    assert before + timedelta(minutes=19) < reminder.next_due_at <= before + timedelta(minutes=21)
    [(tool, arguments, failed)] = actions()
    assert (tool, arguments["text"], failed) == ("schedule_reminder", "Stretch", False)
    local_time = reminder.next_due_at.astimezone(PARIS)
    assert arguments["when"] == local_time.strftime("%Y-%m-%dT%H:%M")
    assert reply_text().startswith("Okay! I'll remind you to stretch ")
    assert delivery.reply.source == Source.ASSISTANT
    assert response.json()["id"] == delivery.message.public_id


def test_the_receipt_shows_what_it_did_like_the_model_backed_assistant(client, send, person):
    _, key = make_key(person, "reader", Generation.V2, may_read_replies=True)
    message_id = send(key, {"message": "Remind me to call Sam tomorrow at noon"}).json()["id"]

    receipt = client.get(f"/api/v1/inbound/messages/{message_id}", headers={"Authorization": f"Bearer {key}"}).json()
    [action] = receipt["actions"]
    assert action["tool"] == "schedule_reminder" and action["isError"] is False
    assert action["arguments"]["text"] == "Call Sam" and action["arguments"]["when"].endswith("T12:00")
    assert receipt["reply"]["text"].endswith("tomorrow at 12:00.")

    client.force_login(person)
    page = client.get("/conversation/").content.decode()
    assert "What the assistant did (1 action)" in page and "schedule_reminder" in page


def test_a_fixed_now_and_the_persons_zone_decide_the_instant(v2):
    key, _ = v2
    key.owner.profile.time_zone = "America/New_York"
    key.owner.profile.save()
    message = record_user_message(user=key.owner, endpoint=Endpoint.CONSOLE, text="Remind me to stretch at 3pm")
    Delivery.objects.filter(message=message).update(status=DeliveryStatus.PROCESSING, attempts=1)  # attempt 1 holds it
    now = datetime(2099, 1, 5, 10, 0, tzinfo=ZoneInfo("America/New_York"))

    reply = local.deliver(build_request(message, 1), now=now)

    reminder = Reminder.objects.get()
    assert reminder.next_due_at == datetime(2099, 1, 5, 20, 0, tzinfo=ZoneInfo("UTC"))
    assert reply.text == "Okay! I'll remind you to stretch today at 15:00."


def test_an_unclear_time_is_asked_about_and_the_answer_completes_it(send, person, v2):
    send(v2[1], {"message": "Remind me to stretch at 3"})
    assert reply_text() == "Did you mean 3am or 3pm? (Just reply with the time.)"
    assert not Reminder.objects.exists() and actions() == []

    send(v2[1], {"message": "pm"})

    reminder = Reminder.objects.get()
    assert (reminder.text, reminder.next_due_at.astimezone(PARIS).hour) == ("Stretch", 15)
    assert "remind you to stretch" in reply_text() and "at 15:00" in reply_text()


def test_it_lists_reminders_and_cancels_one_by_its_words(send, person, v2):
    reminders.schedule_reminder(person, "Stretch", "2099-01-05T15:00")
    reminders.schedule_reminder(person, "Water the plants", "2099-01-06T18:00", "FREQ=DAILY")

    send(v2[1], {"message": "What reminders do I have?"})
    listed = reply_text()
    assert listed.startswith("You have 2 reminders:")
    assert "- Stretch: on Mon, 5 Jan 2099 at 15:00" in listed
    assert "- Water the plants: every day at 18:00 (next: Tue, 6 Jan 2099 at 18:00)" in listed
    assert "rem_" not in listed and "FREQ" not in listed

    send(v2[1], {"message": "Cancel the stretch reminder"})

    assert Reminder.objects.get(text="Stretch").status == ReminderStatus.CANCELLED
    assert Reminder.objects.get(text="Water the plants").status == ReminderStatus.SCHEDULED
    assert [tool for tool, _, _ in actions()] == ["list_reminders", "list_reminders", "cancel_reminder"]
    assert reply_text() == "Cancelled your reminder “Stretch”."


def test_a_cancellation_that_names_no_single_reminder_asks_which(send, person, v2):
    reminders.schedule_reminder(person, "Call Sam", "2099-01-05T15:00")
    reminders.schedule_reminder(person, "Call the bank", "2099-01-05T16:00")

    send(v2[1], {"message": "cancel the call reminder"})
    assert reply_text().startswith("Which one should I cancel?")
    send(v2[1], {"message": "cancel the dentist reminder"})
    assert reply_text().startswith("I found no reminder about “dentist”.")
    assert Reminder.objects.filter(status=ReminderStatus.SCHEDULED).count() == 2


def test_it_lists_webhooks_without_their_secrets(send, person, v2):
    _, token, secret = triggers.create_trigger(person, "a build fails", "Tell me which test failed", signed=True)

    send(v2[1], {"message": "list my webhooks"})

    text = reply_text()
    assert text == "You have 1 webhook:\n- when a build fails: Tell me which test failed (fired 0 times)"
    assert token not in text and secret not in text
    assert actions() == [("list_webhook_triggers", {}, False)]


def test_a_refusal_of_the_tool_is_said_plainly(send, person, v2, monkeypatch):
    monkeypatch.setattr(reminders, "MAX_SCHEDULED_PER_PERSON", 1)
    reminders.schedule_reminder(person, "Stretch", "2099-01-05T15:00")

    send(v2[1], {"message": "Remind me to drink water in 20 minutes"})

    assert reply_text().startswith("I couldn't do that: ")
    assert "1 scheduled reminders" in reply_text()
    assert actions()[0][2] is True  # recorded as a failed call


def test_calendar_and_mail_need_a_connection_first(send, person, v2):
    send(v2[1], {"message": "What's on my calendar today?"})
    assert reply_text() == "No calendar is connected: add one under Connections, then ask me again."
    send(v2[1], {"message": "show my unread mail"})
    assert reply_text() == "No mailbox is connected: add one under Connections, then ask me again."
    assert actions() == []


def test_what_it_does_not_understand_gets_the_list_of_what_it_can_do(send, v2):
    send(v2[1], {"message": "Book a table for two"})
    text = reply_text()
    assert text.startswith("Sorry, I didn't understand that.")
    assert "remind me to stretch at 3pm" in text and "ASSISTANT_BACKEND=openai" in text
    assert "take no action" not in text and actions() == []


def test_a_payload_without_words_is_acknowledged_with_its_members(send, v2):
    key, plaintext = v2
    send(plaintext, fixture_body("github_push.json"))

    text = reply_text()
    assert f"“{key.name}” ({key.hint})" in text and plaintext not in text and key.digest not in text
    assert "repository (an object with" in text and "ref (text “refs/heads/main”)" in text
    assert "You wrote" not in text
    assert text.endswith("I found no request in it that I can act on (I understand requests such as “remind me to …”).")


def test_it_answers_messages_from_the_legacy_endpoint(send, v1, user):
    send(v1[1], {"message": "remind me to add milk in 5 minutes"}, path=LEGACY)
    assert Reminder.objects.get().text == "Add milk"
    # The profile's zone is still the default: the reply says which zone it read the time in.
    assert reply_text().endswith("(That is UTC: set your time zone under Settings if you live elsewhere.)")


def test_messages_typed_in_the_app_get_the_same_hand_off(user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="what reminders do I have")

    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert reply_text() == "You have no reminders scheduled."


def test_nothing_is_handed_off_when_the_transaction_rolls_back(user, django_capture_on_commit_callbacks):
    from django.db import transaction

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="never committed")
        raise RuntimeError
    assert callbacks == []
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)  # the worker closes old connections between tasks
def test_a_reminder_asked_for_through_the_api_fires_through_the_worker(client, v2, settings):
    """The production path (and `make run`'s): the API queues the message, the worker's delivery engine hands it to
    the default (local) assistant, which schedules the reminder; the worker's task loop fires it when due."""
    from tests.test_reminders import make_due, reminder_tasks, reminders_in_thread
    from tests.test_task_backends import DATABASE_BACKEND, run_worker

    assert settings.ASSISTANT_BACKEND == "local"
    settings.TASKS = DATABASE_BACKEND
    assert post(client, CURRENT, v2[1], {"message": "Remind me to stretch in 20 minutes"}).status_code == 200

    run_worker(max_tasks=5)  # delivers the message: the assistant schedules the reminder
    assert Reminder.objects.get().status == ReminderStatus.SCHEDULED
    assert reminders_in_thread() == []  # not due yet

    make_due(reminder_tasks().get())
    run_worker(max_tasks=5)

    assert reminders_in_thread() == ["Reminder: Stretch"]
    assert Reminder.objects.get().status == ReminderStatus.DONE


def test_the_reminders_page_invites_what_the_built_in_assistant_understands(client, user):
    client.force_login(user)
    page = client.get("/reminders/").content.decode()
    assert "“Remind me to stretch at 3pm”" in page and 'href="/conversation/"' in page


def test_a_webhook_triggers_action_is_understood_like_a_message(user, django_capture_on_commit_callbacks):
    from assistant.models import Action, ActionState
    from ingestion.approvals import answer

    _, token, _ = triggers.create_trigger(user, "the deploy starts", "Remind me to check the deploy in 20 minutes")
    with django_capture_on_commit_callbacks(execute=True):
        post(Client(), "/api/v1/inbound/webhook", token, {"commit": "4f2c"})

    # Understood, but a trigger's message acts only with the person's approval (assistant/approval/requests.py).
    asked = Action.objects.get()
    assert (asked.tool, asked.state) == ("schedule_reminder", ActionState.AWAITING_APPROVAL)
    assert not Reminder.objects.exists()
    assert reply_text().startswith("I need your approval before I remind you “Check the deploy” on ")
    assert "just above" not in reply_text()
    with django_capture_on_commit_callbacks(execute=True):
        answer(user, asked, approve=True)
    assert Reminder.objects.get().text == "Check the deploy"
    assert reply_text().startswith("Done. Scheduled the reminder “Check the deploy”: ")
    assert "rem_" not in reply_text()


def test_a_keys_message_that_needs_approval_acts_once_the_person_approves(
    person, send, django_capture_on_commit_callbacks
):
    from assistant.models import ActionState
    from ingestion.approvals import answer

    _, key = make_key(person, "cautious", Generation.V2, tools_need_approval=True)
    send(key, {"message": "Remind me to stretch in 20 minutes"})

    asked = Action.objects.get()
    assert (asked.tool, asked.state, asked.arguments["text"]) == (
        "schedule_reminder",
        ActionState.AWAITING_APPROVAL,
        "Stretch",
    )
    assert not Reminder.objects.exists()
    # Never "Okay! I'll remind you…" before it is done; what waits, in its own words.
    assert reply_text().startswith("I need your approval before I remind you “Stretch” on ")
    assert reply_text().endswith("Nothing is done until you approve it.")

    send(key, {"message": "what reminders do I have"})  # reading needs no approval
    assert reply_text() == "You have no reminders scheduled."

    with django_capture_on_commit_callbacks(execute=True):
        answer(person, asked, approve=True)

    reminder = Reminder.objects.get()
    assert reminder.text == "Stretch"
    due = reminder.next_due_at.astimezone(PARIS)
    assert reply_text() == f"Done. Scheduled the reminder “Stretch”: {due:%a} {due.day} {due:%b, %H:%M}."


def test_an_attempt_that_replays_a_lost_one_does_not_schedule_twice(
    person, django_capture_on_commit_callbacks, monkeypatch
):
    with django_capture_on_commit_callbacks(execute=True):
        message = record_user_message(user=person, endpoint=Endpoint.CONSOLE, text="Remind me to stretch in 20 minutes")
    first = reply_text()
    # A second attempt at the same message minutes later, as after a takeover: "in 20 minutes" still counts from
    # when the person wrote it, so the calls are the same and the ledger does not repeat them.
    later = timezone.now() + timedelta(minutes=3)
    monkeypatch.setattr(local.timezone, "now", lambda: later)
    Delivery.objects.filter(message=message).update(status=DeliveryStatus.PROCESSING, attempts=2)

    again = local.deliver(build_request(Message.objects.get(pk=message.pk), 2))

    assert Reminder.objects.count() == 1
    assert again.text == first
    assert Action.objects.count() == 1


def _answer_to(person, text: str, django_capture_on_commit_callbacks) -> str:
    with django_capture_on_commit_callbacks(execute=True):
        record_user_message(user=person, endpoint=Endpoint.CONSOLE, text=text)
    return reply_text()


def test_a_long_text_to_summarize_is_answered_with_what_it_takes(person, django_capture_on_commit_callbacks):
    text = ("Summarize this: " + "The quarterly report shows revenue up four percent, with churn flat. " * 13)[:885]
    reply = _answer_to(person, text, django_capture_on_commit_callbacks)
    assert reply.startswith("I can't summarize, translate or rewrite a text")
    assert "ASSISTANT_BACKEND=openai" in reply and not Action.objects.exists()


def test_a_long_text_that_asks_nothing_says_how_long_it_is(person, django_capture_on_commit_callbacks):
    log = "2026-11-25 10:00:01 worker-3 INFO delivered msg_abc in 201 ms\n" * 12
    reply = _answer_to(person, log, django_capture_on_commit_callbacks)
    assert reply.startswith("That is a long text (7") and "I read requests of up to 400 characters" in reply
    assert not Action.objects.exists()


def test_a_json_payload_is_answered_as_a_payload(person, django_capture_on_commit_callbacks):
    reply = _answer_to(person, '{"event": "deploy", "status": "ok"}', django_capture_on_commit_callbacks)
    assert reply.startswith("That is a JSON payload (an object with 2 members (event, status))")
    assert not Action.objects.exists()


def test_a_webhook_whose_condition_is_a_sentence_is_listed_once_with_when(send, person, v2):
    triggers.create_trigger(person, "When the nightly backup fails", "Text me")

    send(v2[1], {"message": "what webhooks do I have?"})

    assert reply_text() == "You have 1 webhook:\n- When the nightly backup fails: Text me (fired 0 times)"


def test_a_sentence_that_mentions_webhooks_lists_nothing(send, person, v2):
    triggers.create_trigger(person, "a build fails", "Tell me which test failed")

    for text in ("Hello from the legacy webhook", "The webhook for orders is broken"):
        send(v2[1], {"message": text})
        assert "You have 1 webhook" not in reply_text()
    assert actions() == []
