"""The tools the assistant may call while answering a message: built-in ones (reminders, webhook triggers) and the
tools of the person's active MCP connections. ``Toolbox.call`` is the one way to run a call, whichever assistant
asks for it: each call is recorded as an ``Action`` of the delivery, in the ledger that makes it act at most once
per delivery across attempts (assistant/tools/ledger.py); whatever happens (an unknown tool, arguments that are not
JSON, a server that hangs or fails) becomes a result text for the model, flagged as an error, never an exception out
of the delivery.

Attempt threads hold no database connection (ops/database_work.py): the ledger's writes, and every tool with
``uses_database`` (the default), run on the process's small pool of database threads; a tool that mostly waits on
the network (an MCP server) sets ``uses_database=False``, runs on the attempt's own thread, and sends its few
database writes through ``ops.database_work.database``."""

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from assistant.approval import requests as approvals
from assistant.approval.rule import Circumstances, Effect, Origin, Verdict, decide, surely_reads
from assistant.approval.text import requester, tool_read
from assistant.models import Action, ToolKind
from assistant.tools import ledger
from conversations.models import Delivery
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_RESULT_CHARACTERS = 8000
MAX_ARGUMENT_CHARACTERS = 20_000
_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
# What the model is told of any call it makes for a test key's message: the receipt shows what it wanted.
TEST_MESSAGE_REFUSAL = "this is a test message (sent with a test key): no tool runs. Say what you would do."


class ToolError(Exception):
    """The tool could not do what was asked; the text goes back to the model as the call's result."""


@dataclass
class Call:
    """One tool call in progress: what the tool's code gets besides its arguments."""

    user: User
    action: Action
    deadline: float  # time.monotonic() by which the call must be over

    def seconds_left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)


@dataclass(frozen=True)
class Tool:
    name: str  # as the model sees it: ^[a-zA-Z0-9_-]{1,64}$, unique in the toolbox
    description: str
    parameters: dict[str, Any]
    kind: ToolKind
    run: Callable[[dict[str, Any], Call], str]
    original_name: str = ""  # the name on the MCP server, when it differs
    connection: Any = None  # connections.models.Connection for MCP tools
    # Whether calling it changes nothing (listing, searching, reading). Unknown means side-effecting: an MCP
    # server's tool, or anything not marked, is treated as one that acts. A read-only call a lost attempt left
    # unfinished simply runs again; others are not repeated (assistant/tools/ledger.py).
    read_only: bool = False
    # read_only rests on an MCP server's own word (its readOnlyHint): believed as far as the person trusts the
    # server (assistant/approval/rule.py, Effect.CLAIMS_TO_READ).
    claim_only: bool = False
    # It leaves the person's account for good (a mail): every call is the person's own yes (Effect.SENDS).
    sends: bool = False
    # Whether its result carries words from outside the person (a mail, an event, a stored text, an MCP server's
    # answer): once it ran, a call that acts waits for the person for the rest of the attempt.
    # Unknown means yes; only a tool whose result is our own words about what it did says False.
    brings_outside_content: bool = True
    # Runs on the database threads (ops/database_work.py); False for a tool that mostly waits on the network and
    # sends its few database writes through ops.database_work.database itself.
    uses_database: bool = True

    @property
    def effect(self) -> Effect:
        if self.sends:
            return Effect.SENDS
        if not self.read_only:
            return Effect.ACTS
        return Effect.CLAIMS_TO_READ if self.claim_only else Effect.READS

    @property
    def trusted(self) -> bool:
        """The person trusts its server's read-only claims (ours need no trust)."""
        return self.connection is not None and bool(self.connection.trusted)

    @property
    def surely_reads(self) -> bool:
        return surely_reads(self.effect, self.trusted)

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class Plan:
    """A call as the model asked for it, looked up and decided before anything is recorded or run."""

    tool: Tool | None
    name: str
    arguments: dict[str, Any]
    problem: str | None  # why it cannot run at all (no such tool, arguments that are not a JSON object, refused)
    verdict: Verdict
    unparsed: str | None = None  # the arguments as sent, when they are not a JSON object


@dataclass
class Toolbox:
    user: User
    delivery: Delivery
    attempt: int
    tools: dict[str, Tool] = field(default_factory=dict)
    # Tools the key's owner did not let its messages use (keys' tool policy): never offered, refused if called.
    withheld: dict[str, Tool] = field(default_factory=dict)
    time_zone: str = "UTC"  # the person's, read with the toolbox (an attempt thread cannot read the profile)
    next_index: int = 0  # the index the next call gets in the delivery's ledger
    # What the decision (assistant/approval/rule.py) weighs for each call: who sent the message (set from it by
    # assistant/tools/toolbox.py), whether the key's owner waived asking, and whether words from outside the person
    # reached the model (set from the message and the thread, then by each tool whose result brings such words).
    # requested_by: who asked, in the person's words; read_from: what brought outside words in, for the question.
    origin: Origin = Origin.PERSON
    waived: bool = False
    read_outside: bool = False
    requested_by: str = ""
    read_from: str = ""
    # Whether what a tool returns can lead the next calls: a model reads results and may follow words in them; the
    # built-in assistant (assistant/backends/local.py) chooses its calls from the person's words by its own code.
    follows_results: bool = True
    # The message came with a test key (keys/models.py, test_mode): the decision refuses every call, no tool is offered.
    test: bool = False

    def add(self, tool: Tool, *, allowed: bool = True) -> None:
        name = tool_name(tool.name)
        suffix = 2
        while name in self.tools or name in self.withheld:
            name = tool_name(f"{tool.name[:58]}_{suffix}")
            suffix += 1
        (self.tools if allowed else self.withheld)[name] = replace(
            tool, name=name, original_name=tool.original_name or tool.name
        )

    def as_openai(self) -> list[dict[str, Any]]:
        return [tool.as_openai() for tool in self.tools.values()]

    def call(
        self, call_id: str, name: str, raw_arguments: Any, round_number: int, deadline: float, *, approved: bool = False
    ) -> str:
        """Run one tool call the model asked for, at most once for the delivery, and return what the model is told:
        plan (look it up, decide: run, ask or refuse), record it in the ledger, run it, record its result.
        ``approved``: the person approved this very call (only ``call_approved`` says so)."""
        plan = self.plan(name, raw_arguments, approved)
        entry = database(ledger.begin, self.planned(plan, call_id, round_number))
        self.next_index = entry.index + 1
        if entry.action is None or entry.verdict in (ledger.Verdict.AWAIT, ledger.Verdict.UNKNOWN):
            return _not_run(entry, plan)
        self.note_read(plan.tool, entry.action)
        if entry.verdict is ledger.Verdict.REUSE:
            return entry.action.result
        return self.run(plan, entry.action, deadline)

    def plan(self, name: Any, raw_arguments: Any, approved: bool = False) -> Plan:
        """Look the call up and decide it: nothing is recorded or run yet."""
        known = name if isinstance(name, str) else ""
        tool = self.tools.get(known) or self.withheld.get(known)
        arguments, problem = _arguments(raw_arguments)
        unparsed = None if problem is None else str(raw_arguments)[:1000]
        verdict = self.verdict(tool, approved) if tool is not None else Verdict.RUN
        problem = self.cannot_run(tool, str(name), problem, verdict)
        return Plan(tool, str(name), arguments, problem, Verdict.RUN if problem else verdict, unparsed)

    def cannot_run(self, tool: Tool | None, name: str, problem: str | None, verdict: Verdict) -> str | None:
        """Why the call cannot run at all, for the model; None when it can (or may, once the person answers)."""
        if self.test and (tool is None or verdict is Verdict.REFUSE):
            return TEST_MESSAGE_REFUSAL
        if tool is None:
            listed = ", ".join(sorted(self.tools)) or "none"
            return f"there is no tool named {name[:100]!r}. The tools are: {listed}."
        if verdict is Verdict.REFUSE:
            return f"there is no tool named {tool.name!r} for this key's messages (its owner limited its tools)."
        if problem is not None:
            return f"{problem} Call {tool.name} again with a JSON object of arguments."
        return None

    def verdict(self, tool: Tool, approved: bool = False) -> Verdict:
        """The one decision (assistant/approval/rule.py) for a call of ``tool`` now."""
        return decide(
            Circumstances(
                origin=self.origin,
                read_outside=self.read_outside,
                effect=tool.effect,
                key_asks=not self.waived,
                allowed=tool.name not in self.withheld,
                trusted=tool.trusted,
                approved=approved,
                test=self.test,
            )
        )

    def planned(self, plan: Plan, call_id: Any, round_number: int) -> ledger.Planned:
        """The ledger's record of the plan: asked for, or about to run (a call that cannot run is recorded too)."""
        tool, waits = plan.tool, plan.verdict is Verdict.ASK
        return ledger.Planned(
            delivery_id=self.delivery.pk,
            attempt=self.attempt,
            index=self.next_index,
            round=round_number,
            tool_call_id=str(call_id)[:100],
            kind=tool.kind if tool else ToolKind.BUILT_IN,
            tool=(tool.original_name if tool else plan.name)[:255],
            connection=tool.connection if tool else None,
            connection_name=tool.connection.name if tool and tool.connection is not None else "",
            arguments=plan.arguments if plan.unparsed is None else {"_unparsed": plan.unparsed},
            # Run again after a lost attempt only when it surely changes nothing (an untrusted server's claim is not
            # enough).
            read_only=tool.surely_reads if tool else True,
            needs_approval=waits,
            requested_by=self.asker(),
            approval_expires_at=approvals.expires_at() if waits else None,
        )

    def note_read(self, tool: Tool | None, action: Action) -> None:
        """A tool whose result brings outside words reached the model: from here on, what acts asks."""
        if tool is not None and tool.brings_outside_content and self.follows_results:
            self.read_outside, self.read_from = True, self.read_from or tool_read(tool.original_name or tool.name)
            database(ledger.note_read_outside, action)

    def run(self, plan: Plan, action: Action, deadline: float) -> str:
        tool = plan.tool
        if tool is None or plan.problem is not None:
            return _finish(action, f"Error: {plan.problem}", True)
        call = Call(self.user, action, deadline)
        try:
            result = database(tool.run, plan.arguments, call) if tool.uses_database else tool.run(plan.arguments, call)
        except ToolError as error:
            return _finish(action, f"Error: {error}", True)
        except Exception as error:  # a bug in a tool must not end the delivery: the model hears it failed
            logger.exception("tool %s failed", tool.name)
            return _finish(action, f"Error: the tool failed unexpectedly ({type(error).__name__}).", True)
        return _finish(action, result, False)

    def asker(self) -> str:
        """Who asked, for the person: the key or trigger, and what was read on the way."""
        return requester(self.origin, self.requested_by, self.read_from if self.read_outside else "")

    def call_approved(self, action: Action) -> str:
        """Run a call the person approved (it waited in another delivery's ledger) as this delivery's next call."""
        name = next(
            (
                tool.name
                for tool in [*self.tools.values(), *self.withheld.values()]
                if tool.original_name == action.tool
                and (tool.connection.name if tool.connection is not None else "") == action.connection_name
            ),
            action.tool,  # gone since (a connection removed): the call says there is no such tool
        )
        deadline = time.monotonic() + settings.ASSISTANT_TOOL_SECONDS
        return self.call(f"approved-{action.pk}", name, action.arguments, 0, deadline, approved=True)


def tool_name(text: str) -> str:
    return _NAME.sub("_", text).strip("_")[:64] or "tool"


def one_id(description: str) -> dict[str, Any]:
    """The parameters of a tool that takes only the id of one thing (a reminder, an event, a message)."""
    return {"type": "object", "properties": {"id": {"type": "string", "description": description}}, "required": ["id"]}


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return {}, "The arguments must be a JSON object (sent as a string)."
    if len(raw) > MAX_ARGUMENT_CHARACTERS:
        return {}, f"The arguments are longer than {MAX_ARGUMENT_CHARACTERS} characters."
    try:
        parsed = json.loads(raw)
    except ValueError as error:
        return {}, f"The arguments are not valid JSON ({error})."
    if not isinstance(parsed, dict):
        return {}, "The arguments must be a JSON object."
    if "\\u0000" in raw or "\x00" in raw:
        return {}, "The arguments contain a NUL character."
    return parsed, None


def _not_run(entry: ledger.Entry, plan: Plan) -> str:
    """What the model is told of a call the ledger did not let this attempt run."""
    if entry.verdict is ledger.Verdict.GONE:
        connection = plan.tool.connection.name if plan.tool and plan.tool.connection is not None else ""
        return f"Error: the connection {connection!r} was removed; nothing was done."
    if entry.verdict is ledger.Verdict.AWAIT and entry.action is not None:
        database(approvals.announce, entry.action)
        return approvals.told_to_the_model(entry.action)
    if entry.verdict is ledger.Verdict.UNKNOWN:
        return (
            "Error: an earlier attempt at this message started this same call and was interrupted before it "
            "could record the result, so whether it took effect is unknown. It is not repeated: tell the person."
        )
    return "Error: this attempt no longer holds the message (another worker took it over); nothing was done."


def _finish(action: Action, result: str, is_error: bool) -> str:
    text = result.replace("\x00", "")
    if len(text) > MAX_RESULT_CHARACTERS:
        text = text[:MAX_RESULT_CHARACTERS] + "… (cut)"
    database(ledger.finish, action, text, is_error)
    return text
