"""An approved action runs once even when the worker carrying it out is killed (kill -9): killed in the middle of the
call, the next worker takes the approval's delivery over when the lease expires, finds the call begun in the ledger and
does not repeat it (the assistant is told its effect is unknown); killed between the approval and the call (it had
taken the delivery and was about to begin the call), nothing was begun, and the next worker makes the call, once.
Real `manage.py db_worker` processes on a private PostgreSQL database, a real MCP server on 127.0.0.1 (whose tool is
held until the worker is dead, or whose connection row another session holds), and the webhook runtime that receives
what the assistant is told."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.delivery_stack import Worker, delivery_stack, runtime_server, wait_until
from tests.live_stack import run_python
from tests.mcp_server import running_mcp_server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack")]  # see tests/live_stack.py

APPROVED_AND_QUEUED = """
import json, time
from django.utils import timezone
from assistant.models import Action, ActionState
from assistant.tools.toolbox import toolbox_for
from connections.services import add_connection
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from ingestion.approvals import answer
from keys.models import ApiKey
key = ApiKey.objects.select_related("owner").order_by("pk").first()
person = key.owner
add_connection(person, "Tracker", %(url)r)
conversation = conversation_of(person)
message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.API, text="file it",
                                 api_key=key)
asking = Delivery.objects.create(message=message, conversation=conversation, api_key=key, endpoint=Endpoint.CURRENT,
                                 status=DeliveryStatus.PROCESSING, attempts=1, started_at=timezone.now())
box = toolbox_for(person, asking, 1)
box.call("call_1", "tracker__create_issue", json.dumps({"title": "Build broke"}), 1, time.monotonic() + 30)
Delivery.objects.filter(pk=asking.pk).update(status=DeliveryStatus.DELIVERED)
action = Action.objects.get(delivery=asking)
assert action.state == ActionState.AWAITING_APPROVAL, action.state
answer(person, action, approve=True)
approval = Message.objects.get(source=Source.APPROVAL)
print(json.dumps([action.pk, approval.public_id]))
"""

LEDGER_OF = """
import json
from assistant.models import Action
from conversations.models import Message
approval = Message.objects.get(public_id=%(id)r)
print(json.dumps([[a.tool, a.state, a.attempt] for a in Action.objects.filter(delivery=approval.delivery)]
                 + [[approval.delivery.status, approval.delivery.attempts]]))
"""


def test_an_approved_call_is_not_repeated_after_its_worker_is_killed_mid_call():
    with (
        delivery_stack(users=1, MCP_ALLOW_PRIVATE_ADDRESSES="1") as stack,
        running_mcp_server(hold_create_issue=True) as tracker,
        runtime_server() as runtime,
    ):
        _action_id, approval_id = run_python(APPROVED_AND_QUEUED % {"url": tracker.url}, stack.env)
        env = stack.worker_env(
            runtime, MCP_ALLOW_PRIVATE_ADDRESSES="1", DELIVERY_LEASE_SECONDS="3", DELIVERY_LEASE_MARGIN_SECONDS="1"
        )
        doomed = Worker(env, "approval-doomed")
        try:
            wait_until(lambda: ("create_issue", {"title": "Build broke", "body": ""}) in tracker.calls, 30, "called")
            doomed.signal(signal.SIGKILL)
            doomed.wait(timeout=10)
        finally:
            doomed.stop()
        tracker.release.set()  # the server finishes the call nobody waits for any more
        survivor = Worker(env, "approval-survivor")
        try:
            told = wait_until(lambda: runtime.seen(approval_id), 40, "the approval handed over by the next worker")
        finally:
            survivor.stop()
        ledger = run_python(LEDGER_OF % {"id": approval_id}, stack.env)

    assert [call for call in tracker.calls if call[0] == "create_issue"] == [
        ("create_issue", {"title": "Build broke", "body": ""})
    ]  # once, though the worker that made it died before recording it
    assert ledger[0][:2] == ["create_issue", "interrupted"] and ledger[-1][0] == "delivered"
    assert "interrupted" in told[0].text and "not repeated" in told[0].text


@contextmanager
def connections_locked(database_url: str) -> Iterator[None]:
    """Hold every MCP connection's row (FOR UPDATE) from another session: a worker about to begin a call of its
    tools waits there (assistant/tools/ledger.py locks the connection before it writes the call), before anything of
    the call is written or sent."""
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT id FROM connections_connection FOR UPDATE")
        yield
        holder.rollback()


def sessions_waiting_for_a_lock(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as probe:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_an_approved_call_whose_worker_is_killed_before_it_begins_runs_once_by_the_next_worker():
    with (
        delivery_stack(users=1, MCP_ALLOW_PRIVATE_ADDRESSES="1") as stack,
        running_mcp_server() as tracker,
        runtime_server() as runtime,
    ):
        database_url = stack.env["DATABASE_URL"]
        _action_id, approval_id = run_python(APPROVED_AND_QUEUED % {"url": tracker.url}, stack.env)
        env = stack.worker_env(
            runtime, MCP_ALLOW_PRIVATE_ADDRESSES="1", DELIVERY_LEASE_SECONDS="3", DELIVERY_LEASE_MARGIN_SECONDS="1"
        )
        with connections_locked(database_url):
            doomed = Worker(env, "approval-doomed-before-the-call")
            try:
                wait_until(lambda: sessions_waiting_for_a_lock(database_url), 30, "the worker about to begin the call")
                doomed.signal(signal.SIGKILL)
                doomed.wait(timeout=10)
            finally:
                doomed.stop()
        assert [call for call in tracker.calls if call[0] == "create_issue"] == []  # it died before the call
        survivor = Worker(env, "approval-survivor-before-the-call")
        try:
            told = wait_until(lambda: runtime.seen(approval_id), 40, "the approval handed over by the next worker")
        finally:
            survivor.stop()
        ledger = run_python(LEDGER_OF % {"id": approval_id}, stack.env)

    assert [call for call in tracker.calls if call[0] == "create_issue"] == [
        ("create_issue", {"title": "Build broke", "body": ""})
    ]  # once, by the worker that took the approval over
    assert ledger[0][:2] == ["create_issue", "done"] and ledger[-1][0] == "delivered"
    assert "Opened issue #42" in told[0].text
