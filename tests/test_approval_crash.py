"""An approved action runs once even when the worker carrying it out is killed (kill -9) in the middle of the call:
the next worker takes the approval's delivery over when the lease expires, finds the call begun in the ledger and does
not repeat it; the assistant is told its effect is unknown. Real `manage.py db_worker` processes on a private
PostgreSQL database, a real MCP server on 127.0.0.1 whose tool is held until the worker is dead, and the webhook
runtime that receives what the assistant is told."""

import signal

from tests.delivery_stack import Worker, delivery_stack, runtime_server, wait_until
from tests.live_stack import run_python
from tests.mcp_server import running_mcp_server

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
