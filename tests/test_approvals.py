"""Approval (assistant/approval/requests.py, ingestion/approvals.py): a side-effecting tool the assistant wants for a
key's or a trigger's message waits for the person; approved, it runs once in the approval's own delivery and the
assistant goes on with the result; denied or expired, it says so. And a key's tool policy (what its messages may use).
The real toolbox, built-in tools and the immediate task backend with the local assistant; the worker-kill case is in
tests/test_approval_crash.py."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from accounts.models import AuditEvent, AuditKind
from assistant.approval import requests as approvals
from assistant.models import Action, ActionState
from assistant.tools.toolbox import toolbox_for
from conversations.models import Delivery, DeliveryStatus, Message, Role, Source
from keys.models import ApiKey, ToolAccess
from keys.services import create_key
from reminders.models import Reminder
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.test_tool_ledger import call

pytestmark = pytest.mark.django_db

REMIND = {"text": "renew the domain", "when": "2099-01-05T15:00"}


def box_for(delivery: Delivery):
    delivery = Delivery.objects.select_related("message__api_key", "message__trigger").get(pk=delivery.pk)
    return toolbox_for(delivery.message.conversation.user, delivery, delivery.attempts)


@pytest.fixture
def owner():
    return UserFactory(email="ada@example.com")


@pytest.fixture
def asked(owner):
    """A key's message made the assistant want to schedule a reminder: the call waits for the person."""
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    delivery = delivery_under_way(owner, key=key)
    told = call(box_for(delivery), "schedule_reminder", REMIND)
    # The assistant answered ("it awaits your approval"): the thread's next message may be handed over.
    Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.DELIVERED)
    return Action.objects.get(delivery=delivery), told


def test_a_side_effecting_tool_for_a_keys_message_waits_and_the_person_is_asked(asked):
    action, told = asked
    assert action.state == ActionState.AWAITING_APPROVAL
    assert action.requested_by.startswith("API key “ci” (psk_")
    assert "must approve it first" in told
    assert not Reminder.objects.exists()  # not run
    question = action.approval_message
    assert question.role == Role.ASSISTANT and question.context == {approvals.APPROVAL_CONTEXT: action.pk}
    assert question.text.startswith("Approve this? Remind you “renew the domain” on Mon, 5 Jan 2099, 15:00 UTC.")
    assert "\nAsked by API key “ci” (psk_" in question.text  # words, not JSON
    assert "{" not in question.text and "schedule_reminder" not in question.text
    assert f"/conversation/approvals/{action.pk}/" in question.text
    assert question.text.endswith(f"Reply YES {action.approval_code} to approve or NO {action.approval_code} to deny.")


def test_a_replayed_call_waits_on_the_same_question(asked):
    action, _ = asked
    Delivery.objects.filter(pk=action.delivery_id).update(attempts=2, status=DeliveryStatus.PROCESSING)  # a takeover
    told = call(box_for(action.delivery), "schedule_reminder", REMIND)
    assert "must approve it first" in told
    assert Action.objects.count() == 1
    assert Message.objects.filter(role=Role.ASSISTANT).count() == 1  # asked once


def test_a_read_only_tool_runs_without_approval(owner):
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    delivery = delivery_under_way(owner, key=key)
    call(box_for(delivery), "list_reminders", {})
    assert Action.objects.get().state == ActionState.DONE


def test_what_the_person_typed_runs_without_approval(owner):
    delivery = delivery_under_way(owner, source=Source.APP)
    call(box_for(delivery), "schedule_reminder", REMIND)
    assert Action.objects.get().state == ActionState.DONE and Reminder.objects.count() == 1


def test_a_webhook_triggers_message_always_waits(owner):
    from triggers.services import create_trigger

    trigger, _, _ = create_trigger(owner, "When the build breaks", "Remind me to look")
    delivery = delivery_under_way(owner, trigger=trigger, source=Source.WEBHOOK_TRIGGER)
    call(box_for(delivery), "schedule_reminder", REMIND)
    action = Action.objects.get()
    assert action.state == ActionState.AWAITING_APPROVAL
    assert "webhook trigger “When the build breaks”" in action.requested_by


def test_a_key_may_waive_approval(owner):
    key, _ = create_key(owner, "trusted", tools_need_approval=False)
    call(box_for(delivery_under_way(owner, key=key)), "schedule_reminder", REMIND)
    assert Reminder.objects.count() == 1


@pytest.mark.parametrize(
    ("access", "listed", "offered"),
    [
        (ToolAccess.ALL, [], {"schedule_reminder", "list_reminders", "cancel_reminder"}),
        (ToolAccess.READ_ONLY, [], {"list_reminders"}),
        (ToolAccess.NONE, [], set()),
        (ToolAccess.LISTED, ["cancel_reminder"], {"cancel_reminder"}),
    ],
)
def test_a_keys_tool_policy_decides_what_its_messages_may_use(owner, access, listed, offered):
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    ApiKey.objects.filter(pk=key.pk).update(tool_access=access, allowed_tools=listed)
    box = box_for(delivery_under_way(owner, key=ApiKey.objects.get(pk=key.pk)))
    reminders = {name for name in box.tools if "reminder" in name}
    assert reminders == offered
    if "schedule_reminder" not in offered:
        assert "no tool named" in call(box, "schedule_reminder", REMIND)
        assert not Reminder.objects.exists()


# --- the person's answer, in the console ---------------------------------------------------------------------------
def test_approved_it_runs_once_and_the_assistant_goes_on_with_the_result(
    client, owner, asked, django_capture_on_commit_callbacks
):
    action, _ = asked
    client.force_login(owner)
    thread = client.get("/conversation/").content.decode()
    assert f'action="/conversation/approvals/{action.pk}/"' in thread and 'value="approve"' in thread

    with django_capture_on_commit_callbacks(execute=True):  # the hand-off follows the commit
        response = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"})

    assert response.status_code == 302
    assert Reminder.objects.count() == 1  # carried out in the approval's delivery (immediate backend)
    approval = Message.objects.get(source=Source.APPROVAL)
    assert approval.api_key_id == action.delivery.message.api_key_id  # still under the key's rules
    carried = Action.objects.get(delivery=approval.delivery)
    assert (carried.tool, carried.state, carried.arguments) == ("schedule_reminder", ActionState.DONE, REMIND)
    assert approval.delivery.status == DeliveryStatus.DELIVERED
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    assert AuditEvent.objects.filter(kind=AuditKind.APPROVAL_GIVEN, account=owner).count() == 1

    again = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}, follow=True)
    assert "answered already" in again.content.decode()
    assert Reminder.objects.count() == 1


def test_the_backend_gets_the_result_of_the_approved_call(owner, asked, settings):
    from assistant.backends.approved import carry_out
    from assistant.conversation import build_request
    from ingestion.approvals import answer

    action, _ = asked
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # we attempt it here
    answer(owner, action, approve=True)
    approval = Message.objects.get(source=Source.APPROVAL)
    Delivery.objects.filter(message=approval).update(status=DeliveryStatus.PROCESSING, attempts=1)

    text = carry_out(build_request(approval, 1))
    assert text.startswith("I approved remind you “renew the domain” on Mon, 5 Jan 2099, 15:00 UTC")
    assert "Result:" in text and "renew the domain" in text
    assert carry_out(build_request(approval, 1)) == text  # the same attempt again: the ledger's result, no rerun
    assert Reminder.objects.count() == 1


def test_denied_it_is_not_done_and_the_assistant_says_so(client, owner, asked):
    action, _ = asked
    client.force_login(owner)
    client.post(f"/conversation/approvals/{action.pk}/", {"decision": "deny"})
    assert Action.objects.get(pk=action.pk).state == ActionState.DENIED
    assert not Reminder.objects.exists()
    said = Message.objects.filter(role=Role.ASSISTANT).order_by("-pk").first()
    assert said.text.startswith("You denied it, so I did not do it: remind you “renew the domain”")
    assert AuditEvent.objects.filter(kind=AuditKind.APPROVAL_DENIED).count() == 1
    assert not Message.objects.filter(source=Source.APPROVAL).exists()


def test_unanswered_it_expires_after_the_setting_and_the_assistant_says_so(client, owner, settings):
    settings.APPROVAL_TIMEOUT_SECONDS = 3600
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        call(box_for(delivery_under_way(owner, key=key)), "schedule_reminder", REMIND)
    action = Action.objects.get()
    assert action.approval_expires_at == start + timedelta(hours=1)
    with time_machine.travel(start + timedelta(minutes=59), tick=False):
        assert approvals.expire_overdue() == 0
    with time_machine.travel(start + timedelta(hours=1, seconds=1), tick=False):
        assert approvals.expire_overdue() == 1
        client.force_login(owner)
        late = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}, follow=True)
    assert "Too late: the request had expired" in late.content.decode()
    assert Action.objects.get(pk=action.pk).state == ActionState.EXPIRED
    assert not Reminder.objects.exists()
    assert Message.objects.filter(text__startswith="Nobody answered in time").count() == 1
    assert AuditEvent.objects.filter(kind=AuditKind.APPROVAL_EXPIRED).count() == 1


def test_an_answer_after_the_deadline_is_too_late_even_before_the_sweep(client, owner, settings):
    settings.APPROVAL_TIMEOUT_SECONDS = 60
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    call(box_for(delivery_under_way(owner, key=key)), "schedule_reminder", REMIND)
    action = Action.objects.get()
    client.force_login(owner)
    with time_machine.travel(timezone.now() + timedelta(minutes=2), tick=False):
        page = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}, follow=True)
    assert "Too late" in page.content.decode()
    assert not Reminder.objects.exists()


def test_approval_needs_the_csrf_token_and_the_owner(owner, asked):
    action, _ = asked
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}).status_code == 403
    stranger = Client()
    stranger.force_login(UserFactory(email="mallory@example.com"))
    assert stranger.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}).status_code == 404
    assert stranger.get(f"/conversation/approvals/{action.pk}/").status_code == 404
    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL


def test_the_approval_page_escapes_what_the_automation_sent(client, owner):
    key, _ = make_key(owner, "<img src=x onerror=alert(1)>", tools_need_approval=True)
    hostile = {"text": "<script>alert('x')</script>", "when": "2099-01-05T15:00"}
    call(box_for(delivery_under_way(owner, key=key)), "schedule_reminder", hostile)
    action = Action.objects.get()
    client.force_login(owner)
    for path in (f"/conversation/approvals/{action.pk}/", "/conversation/"):
        html = client.get(path).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;" in html or "&lt;img" in html, path


def test_the_keys_page_sets_its_tool_policy_with_csrf_and_audit(client, owner):
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    client.force_login(owner)
    page = client.get(f"/keys/{key.pk}/").content.decode()
    assert 'name="tool_access"' in page and 'value="schedule_reminder"' in page

    client.post(f"/keys/{key.pk}/tools/", {"tool_access": "listed", "allowed_tools": ["list_reminders"]})

    key.refresh_from_db()
    assert (key.tool_access, key.allowed_tools, key.tools_need_approval) == ("listed", ["list_reminders"], False)
    assert AuditEvent.objects.filter(kind=AuditKind.KEY_TOOLS_CHANGED, account=owner).count() == 1
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(f"/keys/{key.pk}/tools/", {"tool_access": "all"}).status_code == 403
    assert ApiKey.objects.get(pk=key.pk).tool_access == "listed"


def test_a_cascade_of_follow_ups_stops_at_the_requests_one_message_may_lead_to(owner):
    """A key's message asks for five calls and reads with a tool whose follow-up asks for five more: eight wait
    (APPROVAL_OPEN_PER_MESSAGE), below the key's cap; the model is told why the last two were not asked."""
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    first = delivery_under_way(owner, key=key)
    box = box_for(first)
    call(box, "list_reminders", {})
    for n in range(5):
        call(box, "schedule_reminder", {**REMIND, "text": f"first {n}"})
    Delivery.objects.filter(pk=first.pk).update(status=DeliveryStatus.DELIVERED)
    read = Action.objects.get(tool="list_reminders")
    follow_up = delivery_under_way(owner, key=key, source=Source.TOOL_FOLLOW_UP)
    Message.objects.filter(pk=follow_up.message_id).update(context={"action": read.pk})
    told = [call(box_for(follow_up), "schedule_reminder", {**REMIND, "text": f"then {n}"}) for n in range(5)]

    assert Action.objects.filter(state=ActionState.AWAITING_APPROVAL).count() == 8  # the key's cap is 10
    assert told[-1].startswith("Not done, and not asked: 8 requests that one message led to already wait")
    assert not Reminder.objects.exists()
