"""The hand-off of a person's approval (assistant/approval/requests.py): before the backend sees the message that
records it, the approved call runs as that delivery's first call, through the toolbox and its ledger, and the backend
gets the result as the message's text. Every backend is wrapped (assistant/backends/__init__.py): none skips it."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from assistant.approval import requests as approvals
from assistant.approval.text import asked_by
from assistant.conversation import AssistantRequest
from assistant.tools.toolbox import toolbox_for_request
from conversations.models import Source
from ops.database_work import database


def carrying_out_approvals(backend: Callable[[AssistantRequest], Any]) -> Callable[[AssistantRequest], Any]:
    """Wrap a backend: for the message that records a person's approval, run the approved call first (as the
    delivery's own first call) and hand the backend its result instead of the bare decision."""

    def deliver(request: AssistantRequest) -> Any:
        if request.source != Source.APPROVAL:
            return backend(request)
        return backend(replace(request, text=carry_out(request)))

    return deliver


def carry_out(request: AssistantRequest) -> str:
    action = database(approvals.approved_action, request.message_id)
    if action is None:
        return "The action you approved could not be found any more (its message was deleted); nothing was done."
    box = toolbox_for_request(request)
    if box is None:
        return "Nothing was done: the message or its person is gone."
    result = box.call_approved(action)
    return f"I approved {approvals.describe(action)}, asked for by {asked_by(action.requested_by)}. Result: {result}"
