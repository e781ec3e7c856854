"""The ledger of a delivery's tool calls: each call acts at most once per delivery, whatever happens to the attempts.

Each call has a stable id, the delivery and the call's index (0, 1, ... in the order the attempt makes them), and a
row (``Action``) written *before* the tool runs (``running``) and finished after it (``done``, with its result).
An attempt that took the delivery over from a lost one replays the model's conversation; for its call number k:

- no row: a new call; it runs.
- a row for the same tool with the same arguments, ``done``: not run again; the recorded result is the answer.
- the same, but ``running`` or ``interrupted``: the earlier attempt began it and was lost before recording how it
  ended, so nobody knows whether it acted. A read-only tool (``Tool.read_only``) runs again; any other is not
  repeated: the model is told the call was interrupted and its effect is unknown, and the row says ``interrupted``.
- a row for another tool or other arguments: the model took another path this time. This call and every later one
  of the attempt are new calls, numbered after the delivery's existing ones.

A row is begun only while the attempt still holds its delivery (checked under the delivery's row lock), so an attempt
whose lease was taken over starts no new call. A finished call is recorded whatever became of the attempt: it acted.
What remains possible, and is documented: a worker lost *during* a side-effecting call (after the tool acted, before
its result was written) leaves the call ``interrupted``; it is not repeated, and the person is told it may or may not
have happened.

A call that needs the person's approval (``Planned.needs_approval``: a side-effecting tool for a key's or a
trigger's message, assistant/approval/requests.py) is not begun: its row is written ``awaiting_approval`` and ``begin``
answers AWAIT; a replay of the same call finds that row (or its answer: approved, denied, expired) and waits too.
The approved call then runs in the delivery of the person's approval, as that delivery's own call. The same call
already waiting for the same person is not asked twice (AWAIT names that request), and past the caps on what may
wait (assistant/approval/requests.py ``no_room``) the call is not asked: it is recorded done, as an error whose result
says why, and REUSE hands that result to the model."""

import enum
from dataclasses import dataclass, replace
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from assistant.approval import requests as approvals
from assistant.models import Action, ActionState
from connections.models import Connection
from conversations.models import Delivery, DeliveryStatus


class Verdict(enum.Enum):
    RUN = "run"  # run the tool, then ``finish``
    REUSE = "reuse"  # an earlier attempt ran it: its recorded result is the answer
    UNKNOWN = "unknown"  # an earlier attempt began it and was lost: not repeated
    LOST = "lost"  # this attempt no longer holds the delivery: nothing is run
    AWAIT = "await"  # the call waits for (or got) the person's answer: not run by this delivery
    GONE = "gone"  # the tool's connection was removed (or switched off) since the toolbox was made: nothing is run


@dataclass(frozen=True)
class Planned:
    """A call the model asked for, as the ledger records it."""

    delivery_id: int
    attempt: int
    index: int
    round: int
    tool_call_id: str
    kind: str
    tool: str
    connection: Any
    connection_name: str
    arguments: dict[str, Any]
    read_only: bool
    needs_approval: bool = False
    requested_by: str = ""  # who asked, for the person: "API key “ci” (psk_…ab12)"
    approval_expires_at: Any = None  # datetime until which the person may answer


@dataclass(frozen=True)
class Entry:
    verdict: Verdict
    index: int
    action: Action | None


def begin(planned: Planned) -> Entry:
    """Decide whether the call runs, and record that it began (see the module)."""
    for _ in range(3):  # a concurrent attempt took the same index between our read and our insert: read again
        try:
            with transaction.atomic():
                return _begin(planned)
        except IntegrityError:
            continue
    return Entry(Verdict.UNKNOWN, planned.index, None)


def _begin(planned: Planned) -> Entry:
    held = Delivery.objects.select_for_update().filter(
        pk=planned.delivery_id, status=DeliveryStatus.PROCESSING, attempts=planned.attempt
    )
    if not held.exists():
        return Entry(Verdict.LOST, planned.index, None)
    # Locked until the call's row is written: a removal waits for it, then clears the row's link (SET_NULL), instead
    # of the row pointing at a connection deleted meanwhile (an IntegrityError at commit).
    if planned.connection is not None and not (
        Connection.objects.select_for_update().filter(pk=planned.connection.pk, active=True).exists()
    ):
        return Entry(Verdict.GONE, planned.index, None)
    existing = Action.objects.filter(delivery_id=planned.delivery_id, call_index=planned.index).first()
    if existing is None:
        return _new(planned, planned.index)
    if not _same_call(existing, planned):
        taken = Action.objects.filter(delivery_id=planned.delivery_id).aggregate(last=Max("call_index"))["last"]
        return _new(planned, (taken or 0) + 1)
    if existing.state in WAITING_STATES:
        return Entry(Verdict.AWAIT, planned.index, existing)
    if existing.state == ActionState.DONE:
        return Entry(Verdict.REUSE, planned.index, existing)
    if planned.read_only:
        existing.attempt, existing.round, existing.state = planned.attempt, planned.round, ActionState.RUNNING
        existing.started_at, existing.finished_at = timezone.now(), None
        existing.save(update_fields=["attempt", "round", "state", "started_at", "finished_at"])
        return Entry(Verdict.RUN, planned.index, existing)
    if existing.state != ActionState.INTERRUPTED:
        existing.state = ActionState.INTERRUPTED
        existing.save(update_fields=["state"])
    return Entry(Verdict.UNKNOWN, planned.index, existing)


# A call in one of these states was not run by its delivery: it waits for the person, or got their answer.
WAITING_STATES = (ActionState.AWAITING_APPROVAL, ActionState.APPROVED, ActionState.DENIED, ActionState.EXPIRED)


def _new(planned: Planned, index: int) -> Entry:
    if planned.needs_approval:
        return _new_request(planned, index)
    return Entry(Verdict.RUN, index, _create(planned, index))


def _new_request(planned: Planned, index: int) -> Entry:
    """A call that must wait for the person: the same call already waiting stands for it (nothing new is asked); past
    the caps on what may wait it is not asked at all: the thread says so, and its recorded result tells the model (a
    replay reuses it); otherwise it waits (assistant/approval/requests.py)."""
    same = approvals.waiting_like(planned.delivery_id, planned.tool, planned.connection_name, planned.arguments)
    if same is not None:
        return Entry(Verdict.AWAIT, index, same)
    waiting = approvals.no_room(planned.delivery_id)
    if not waiting:
        return Entry(Verdict.AWAIT, index, _create(planned, index))
    action = _create(replace(planned, needs_approval=False), index)
    finish(action, approvals.not_asked(planned.delivery_id, waiting), is_error=True)
    return Entry(Verdict.REUSE, index, action)


def _same_call(action: Action, planned: Planned) -> bool:
    return (action.tool, action.connection_name, action.arguments) == (
        planned.tool,
        planned.connection_name,
        planned.arguments,
    )


def _create(planned: Planned, index: int) -> Action:
    return Action.objects.create(
        delivery_id=planned.delivery_id,
        attempt=planned.attempt,
        round=planned.round,
        call_index=index,
        state=ActionState.AWAITING_APPROVAL if planned.needs_approval else ActionState.RUNNING,
        requested_by=planned.requested_by[:300],
        approval_expires_at=planned.approval_expires_at if planned.needs_approval else None,
        tool_call_id=planned.tool_call_id,
        kind=planned.kind,
        tool=planned.tool,
        connection=planned.connection,
        connection_name=planned.connection_name,
        arguments=planned.arguments,
    )


def note_read_outside(action: Action) -> None:
    """The call's result carried words from outside the person (Tool.brings_outside_content): the reply of its
    delivery may repeat them, so a later attempt reading the thread weighs it as outside words
    (assistant/origins.py)."""
    if not action.read_outside:
        Action.objects.filter(pk=action.pk).update(read_outside=True)
        action.read_outside = True


def finish(action: Action, result: str, is_error: bool) -> None:
    """The call ended (it acted, or failed): its result is recorded for good."""
    action.result = result
    action.is_error = is_error
    action.state = ActionState.DONE
    action.finished_at = timezone.now()
    action.save(update_fields=["result", "is_error", "state", "finished_at"])
