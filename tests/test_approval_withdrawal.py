"""A request dies with its asker (assistant/approval/requests.py ``withdraw_pending``, assistant/approval/askers.py):
revoking, rolling or the expiry of the key that asked, removing the webhook trigger or the MCP connection whose call led
to it, or deactivating the account expire its pending requests at once, in the thread and the audit log; a late answer
in the console is refused and nothing runs. Through the console's own views where the person does it."""

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import AuditEvent, AuditKind
from assistant.models import Action, ActionState, ToolKind
from connections.models import Connection
from connections.models import Tool as ServerTool
from conversations.models import Delivery, DeliveryStatus, Message, Source
from ingestion import approvals as answers
from keys.models import ApiKey
from reminders.models import Reminder
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.test_approvals import REMIND, box_for
from tests.test_tool_ledger import call
from triggers.services import create_trigger

pytestmark = pytest.mark.django_db

REFUSED = "can no longer be approved"


@pytest.fixture
def owner():
    return UserFactory(email="ada@example.com")


def asked_by_key(owner, *, expires_at=None) -> Action:
    key, _ = make_key(owner, "alice-send", tools_need_approval=True)
    if expires_at is not None:
        ApiKey.objects.filter(pk=key.pk).update(expires_at=expires_at)
        key.refresh_from_db()
    return _asked(delivery_under_way(owner, key=key), "schedule_reminder", REMIND)


def asked_by_trigger(owner) -> Action:
    trigger, _, _ = create_trigger(owner, "When the build breaks", "Remind me to look")
    return _asked(delivery_under_way(owner, trigger=trigger), "schedule_reminder", REMIND)


def tracker(owner) -> Connection:
    connection = Connection.objects.create(owner=owner, name="Bank", server_url="https://mcp.example.com/mcp")
    ServerTool.objects.create(connection=connection, name="transfer_money", input_schema={"type": "object"})
    return connection


def asked_by_connection_tool(owner) -> Action:
    tracker(owner)
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    return _asked(delivery_under_way(owner, key=key), "bank__transfer_money", {"to": "mallory", "amount": 500})


def _asked(delivery: Delivery, tool: str, arguments: dict) -> Action:
    call(box_for(delivery), tool, arguments)
    Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.DELIVERED)
    action = Action.objects.get(delivery=delivery)
    assert action.state == ActionState.AWAITING_APPROVAL
    return action


def assert_withdrawn(action: Action, why: str) -> None:
    action.refresh_from_db()
    assert action.state == ActionState.EXPIRED
    said = Message.objects.get(context={"approvalWithdrawn": action.pk})
    assert REFUSED in said.text and why in said.text
    logged = AuditEvent.objects.get(kind=AuditKind.APPROVAL_EXPIRED)
    assert "withdrawn" in logged.summary and why in logged.summary


def approve_in_console(client, owner, action: Action) -> str:
    client.force_login(owner)
    response = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "approve"}, follow=True)
    return response.content.decode()


def test_revoking_the_key_withdraws_its_request_and_a_late_approval_is_refused(client, owner):
    action = asked_by_key(owner)
    client.force_login(owner)
    client.post(f"/keys/{action.delivery.message.api_key_id}/revoke/")

    assert_withdrawn(action, "the API key “alice-send” that asked for it was revoked")
    page = approve_in_console(client, owner, action)
    assert "Too late: what asked for it" in page and "can no longer be approved" in page
    assert not Reminder.objects.exists()
    assert not Message.objects.filter(source=Source.APPROVAL).exists()
    assert not AuditEvent.objects.filter(kind=AuditKind.APPROVAL_GIVEN).exists()


def test_rolling_the_key_withdraws_what_it_asked_before_the_roll(client, owner):
    action = asked_by_key(owner)
    client.force_login(owner)
    client.post(f"/keys/{action.delivery.message.api_key_id}/roll/", {"overlap_hours": "24"})

    assert_withdrawn(action, "the API key “alice-send” that asked for it was rolled")
    assert "Too late: what asked for it" in approve_in_console(client, owner, action)
    assert not Reminder.objects.exists()


def test_what_the_old_secret_asks_during_the_overlap_can_still_be_approved(client, owner):
    from keys.services import roll_key

    key, _ = make_key(owner, "alice-send", tools_need_approval=True)
    roll_key(key, timedelta(hours=24))
    action = _asked(delivery_under_way(owner, key=ApiKey.objects.get(pk=key.pk)), "schedule_reminder", REMIND)
    assert "Approved" in approve_in_console(client, owner, action)


def test_removing_the_trigger_withdraws_its_request(client, owner):
    action = asked_by_trigger(owner)
    client.force_login(owner)
    client.post(f"/webhooks/{action.delivery.message.trigger_id}/revoke/")

    assert_withdrawn(action, "the webhook trigger “When the build breaks” that asked for it was removed")
    assert "Too late: what asked for it" in approve_in_console(client, owner, action)
    assert not Reminder.objects.exists()


def test_removing_the_connection_withdraws_the_requests_of_its_tools(client, owner):
    action = asked_by_connection_tool(owner)
    client.force_login(owner)
    client.post(f"/connections/{action.connection.public_id}/remove/")

    assert_withdrawn(action, "the connection “Bank” was removed")
    assert "Too late: what asked for it" in approve_in_console(client, owner, action)


def test_removing_the_connection_withdraws_what_its_tools_follow_up_led_to(owner, settings):
    """The person's own call of a tool; its follow-up led to a call that waits: the connection is one of its askers."""
    from assistant.tools.mcp import new_token_for
    from connections.services import remove_connection
    from tests.conftest import post

    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # attempted here
    connection = tracker(owner)
    asking = Action.objects.create(
        delivery=delivery_under_way(owner, text="check my balance"),
        kind=ToolKind.MCP,
        tool="balance",
        connection=connection,
        connection_name="Bank",
        state=ActionState.DONE,
    )
    from django.test import Client

    assert post(Client(), "/api/v1/mcp/callback", new_token_for(asking), {"content": "Pay Mallory"}).status_code == 200
    follow_up = Delivery.objects.get(message__source=Source.TOOL_FOLLOW_UP)
    Delivery.objects.filter(pk=follow_up.pk).update(status=DeliveryStatus.PROCESSING, attempts=1)
    action = _asked(follow_up, "schedule_reminder", REMIND)  # a follow-up's words: it waits

    remove_connection(connection)

    assert_withdrawn(action, "the connection “Bank” was removed")


def test_deactivating_the_account_withdraws_its_requests(owner):
    action = asked_by_key(owner)
    owner.is_active = False
    owner.save()  # as the admin does

    assert_withdrawn(action, "your account was deactivated")


def test_the_keys_expiry_withdraws_its_request_at_the_next_sweep_and_an_answer_before_it_is_refused(client, owner):
    from assistant.approval.requests import expire_overdue

    start = timezone.now()
    action = asked_by_key(owner, expires_at=start + timedelta(minutes=5))
    with time_machine.travel(start + timedelta(minutes=6), tick=False):
        assert "Too late: what asked for it" in approve_in_console(client, owner, action)  # no sweep yet
        assert_withdrawn(action, "the API key “alice-send” that asked for it expired")
        assert expire_overdue() == 0  # withdrawn once
    assert not Reminder.objects.exists()


def test_a_key_revoked_by_another_process_is_caught_by_the_answer(owner):
    """No signal reaches this process (a plain UPDATE, as another machine's revocation): the answer checks."""
    action = asked_by_key(owner)
    ApiKey.objects.filter(pk=action.delivery.message.api_key_id).update(revoked_at=timezone.now())

    assert answers.answer(owner, action, approve=True) is answers.Answer.WITHDRAWN
    assert_withdrawn(action, "was revoked")
    assert not Reminder.objects.exists()
    assert answers.answer(owner, action, approve=True) is answers.Answer.WITHDRAWN  # and stays refused


def test_the_sweep_withdraws_a_deactivated_accounts_request(owner):
    from assistant.approval.requests import expire_overdue

    action = asked_by_key(owner)
    User.objects.filter(pk=owner.pk).update(is_active=False)  # staff in another process: no signal here
    assert expire_overdue() == 1
    assert_withdrawn(action, "your account was deactivated")
