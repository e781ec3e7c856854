"""A tool acts at most once per delivery (assistant/tools/ledger.py): calls have a stable id (delivery, index); an
attempt that took the delivery over reuses what a finished call recorded, does not repeat a side-effecting call
whose outcome a crash hid, may repeat a read-only one, and an attempt that lost its claim starts nothing. The real
toolbox and built-in tools, on the default database."""

import json
import time

import pytest

from assistant.models import Action, ActionState
from assistant.tools.toolbox import toolbox_for
from conversations.models import Delivery
from reminders.models import Reminder
from tests.factories import UserFactory, delivery_under_way

pytestmark = pytest.mark.django_db

REMIND = {"text": "stretch", "when": "2099-01-05T15:00"}


@pytest.fixture
def delivery() -> Delivery:
    return delivery_under_way(UserFactory())


def attempt(delivery: Delivery, number: int):
    Delivery.objects.filter(pk=delivery.pk).update(attempts=number)  # a takeover: attempt n holds it now
    delivery.refresh_from_db()
    return toolbox_for(delivery.message.conversation.user, delivery, number)


def call(box, name: str, arguments: dict, call_id: str = "call_1") -> str:
    return box.call(call_id, name, json.dumps(arguments), 1, time.monotonic() + 30)


def test_each_call_gets_a_stable_id_and_a_finished_one_is_not_run_again_by_a_later_attempt(delivery):
    first = attempt(delivery, 1)
    said = call(first, "schedule_reminder", REMIND)
    call(first, "list_reminders", {}, "call_2")
    assert [a.call_id for a in Action.objects.order_by("call_index")] == [f"{delivery.pk}:0", f"{delivery.pk}:1"]

    second = attempt(delivery, 2)  # the first attempt's worker died after its calls
    assert call(second, "schedule_reminder", REMIND, "other_id") == said
    assert Reminder.objects.count() == 1
    assert Action.objects.count() == 2


def test_a_side_effecting_call_a_crash_left_unfinished_is_not_repeated_and_the_model_is_told(delivery):
    first = attempt(delivery, 1)
    call(first, "schedule_reminder", REMIND)
    Action.objects.update(state=ActionState.RUNNING, result="", finished_at=None)  # as if killed mid-call
    Reminder.objects.all().delete()

    second = attempt(delivery, 2)
    answer = call(second, "schedule_reminder", REMIND)
    assert answer.startswith("Error:") and "unknown" in answer
    assert not Reminder.objects.exists()
    assert Action.objects.get().state == ActionState.INTERRUPTED


def test_a_read_only_call_a_crash_left_unfinished_runs_again(delivery):
    first = attempt(delivery, 1)
    call(first, "list_reminders", {})
    Action.objects.update(state=ActionState.RUNNING, result="")

    second = attempt(delivery, 2)
    assert call(second, "list_reminders", {}) == "No reminders are scheduled."
    action = Action.objects.get()
    assert (action.state, action.attempt) == (ActionState.DONE, 2)


def test_a_different_call_at_the_same_place_is_a_new_call_numbered_after_the_earlier_ones(delivery):
    call(attempt(delivery, 1), "schedule_reminder", REMIND)
    second = attempt(delivery, 2)
    call(second, "schedule_reminder", {**REMIND, "text": "drink water"})
    call(second, "list_reminders", {}, "call_2")
    assert list(Action.objects.order_by("call_index").values_list("call_index", "tool")) == [
        (0, "schedule_reminder"),
        (1, "schedule_reminder"),
        (2, "list_reminders"),
    ]
    assert Reminder.objects.count() == 2


def test_an_attempt_that_lost_its_claim_starts_no_call(delivery):
    stale = attempt(delivery, 1)
    Delivery.objects.filter(pk=delivery.pk).update(attempts=2)  # taken over behind its back
    answer = call(stale, "schedule_reminder", REMIND)
    assert answer.startswith("Error:") and "took it over" in answer
    assert not Action.objects.exists() and not Reminder.objects.exists()
