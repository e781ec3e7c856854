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

from assistant import approvals
from assistant.models import Action, ToolKind
from assistant.tools import ledger
from conversations.models import Delivery
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_RESULT_CHARACTERS = 8000
MAX_ARGUMENT_CHARACTERS = 20_000
_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


class ToolError(Exception):
    """The tool could not do what was asked; the text goes back to the model as the call's result."""


@dataclass
class Call:
    """One tool call in progress: what the tool's code gets besides its arguments."""

    user: User
    action: Action
    deadline: float  # time.monotonic() by which the call must be over
    # The person approved this very call (Toolbox.call_approved, from assistant/approvals.py). Only that path sets
    # it: the call's id comes from the model and proves nothing.
    approved: bool = False

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
    # read_only rests on an MCP server's own word (its readOnlyHint) and the person has not marked the server
    # trusted: believed only for the person's own words (assistant/approvals.py, Effect.CLAIMS_TO_READ).
    claim_only: bool = False
    # Whether its result carries words from outside the person (a mail, an event, a stored text, an MCP server's
    # answer): once it ran, a call that acts waits for the person for the rest of the attempt (approvals.must_ask).
    # Unknown means yes; only a tool whose result is our own words about what it did says False.
    brings_outside_content: bool = True
    # Runs on the database threads (ops/database_work.py); False for a tool that mostly waits on the network and
    # sends its few database writes through ops.database_work.database itself.
    uses_database: bool = True

    @property
    def effect(self) -> approvals.Effect:
        if not self.read_only:
            return approvals.Effect.ACTS
        return approvals.Effect.CLAIMS_TO_READ if self.claim_only else approvals.Effect.READS

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class Toolbox:
    user: User
    delivery: Delivery
    attempt: int
    tools: dict[str, Tool] = field(default_factory=dict)
    time_zone: str = "UTC"  # the person's, read with the toolbox (an attempt thread cannot read the profile)
    next_index: int = 0  # the index the next call gets in the delivery's ledger
    # What the approval rule (approvals.must_ask) weighs for each call: who sent the message (set from it by
    # assistant/tools/toolbox.py), whether the key's owner waived asking, and whether words from outside the person
    # reached the model (set from the message and the thread, then by each tool whose result brings such words).
    # requested_by: who asked, in the person's words; read_from: what brought outside words in, for the question.
    origin: approvals.Origin = approvals.Origin.PERSON
    waived: bool = False
    read_outside: bool = False
    requested_by: str = ""
    read_from: str = ""
    # Whether what a tool returns can lead the next calls: a model reads results and may follow words in them; the
    # built-in assistant (assistant/backends/local.py) chooses its calls from the person's words by its own code.
    follows_results: bool = True
    # Why no tool is offered at all, told to the model for any call (a test key's message: assistant/tools/toolbox.py).
    no_tools_because: str = ""

    def add(self, tool: Tool) -> None:
        name = tool_name(tool.name)
        suffix = 2
        while name in self.tools:
            name = tool_name(f"{tool.name[:58]}_{suffix}")
            suffix += 1
        self.tools[name] = replace(tool, name=name, original_name=tool.original_name or tool.name)

    def as_openai(self) -> list[dict[str, Any]]:
        return [tool.as_openai() for tool in self.tools.values()]

    def call(
        self,
        call_id: str,
        name: str,
        raw_arguments: Any,
        round_number: int,
        deadline: float,
        *,
        approved: bool = False,
        ask: bool = False,
    ) -> str:
        """Run one tool call the model asked for, at most once for the delivery, and return what the model is told.
        A side-effecting tool waits for the person's approval where the toolbox says so, unless ``approved``;
        ``ask``: it waits in any case (the built-in assistant has the person confirm a mail it composed for them)."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        arguments, problem = _arguments(raw_arguments)
        asked = ask and tool is not None and tool.effect is not approvals.Effect.READS
        waits = not approved and tool is not None and problem is None and (asked or self.asks_for(tool))
        planned = ledger.Planned(
            delivery_id=self.delivery.pk,
            attempt=self.attempt,
            index=self.next_index,
            round=round_number,
            tool_call_id=str(call_id)[:100],
            kind=tool.kind if tool else ToolKind.BUILT_IN,
            tool=(tool.original_name if tool else str(name))[:255],
            connection=tool.connection if tool else None,
            connection_name=tool.connection.name if tool and tool.connection is not None else "",
            arguments=arguments if problem is None else {"_unparsed": str(raw_arguments)[:1000]},
            # Run again after a lost attempt only when it surely changes nothing (a server's claim is not enough).
            read_only=tool.effect is approvals.Effect.READS if tool else True,
            needs_approval=waits,
            requested_by=self.asker(),
            approval_expires_at=approvals.expires_at() if waits else None,
        )
        entry = database(ledger.begin, planned)
        self.next_index = entry.index + 1
        if entry.verdict is ledger.Verdict.GONE:
            return f"Error: the connection {planned.connection_name!r} was removed; nothing was done."
        if entry.verdict is ledger.Verdict.AWAIT:
            assert entry.action is not None
            database(approvals.announce, entry.action)
            return approvals.told_to_the_model(entry.action)
        if entry.verdict is ledger.Verdict.LOST:
            return "Error: this attempt no longer holds the message (another worker took it over); nothing was done."
        if entry.verdict is ledger.Verdict.UNKNOWN:
            return (
                "Error: an earlier attempt at this message started this same call and was interrupted before it "
                "could record the result, so whether it took effect is unknown. It is not repeated: tell the person."
            )
        action = entry.action
        assert action is not None  # RUN and REUSE carry their ledger entry
        if tool is not None and tool.brings_outside_content and self.follows_results:
            # Its result reaches the model: from here on, what acts waits for the person (approvals.must_ask).
            self.read_outside, self.read_from = True, self.read_from or tool.original_name or tool.name
            database(ledger.note_read_outside, action)
        if entry.verdict is ledger.Verdict.REUSE:
            return action.result
        if tool is None and self.no_tools_because:
            return _finish(action, f"Error: {self.no_tools_because}", True)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return _finish(action, f"Error: there is no tool named {str(name)[:100]!r}. The tools are: {known}.", True)
        if problem is not None:
            return _finish(action, f"Error: {problem} Call {tool.name} again with a JSON object of arguments.", True)
        call = Call(self.user, action, deadline, approved=approved)
        try:
            result = database(tool.run, arguments, call) if tool.uses_database else tool.run(arguments, call)
        except ToolError as error:
            return _finish(action, f"Error: {error}", True)
        except Exception as error:  # a bug in a tool must not end the delivery: the model hears it failed
            logger.exception("tool %s failed", tool.name)
            return _finish(action, f"Error: the tool failed unexpectedly ({type(error).__name__}).", True)
        return _finish(action, result, False)

    def asks_for(self, tool: Tool) -> bool:
        """Whether a call of ``tool`` would wait for the person now (the one rule: approvals.must_ask)."""
        return approvals.must_ask(self.origin, self.read_outside, self.waived, tool.effect)

    def asker(self) -> str:
        """Who asked, for the person: the key or trigger, and what was read on the way."""
        if not self.read_outside:
            return self.requested_by
        read = f"what the tool {self.read_from} returned" if self.read_from else "words from outside you"
        return f"{self.requested_by or 'Your request'}, after reading {read}"

    def call_approved(self, action: Action) -> str:
        """Run a call the person approved (it waited in another delivery's ledger) as this delivery's next call."""
        name = next(
            (
                tool.name
                for tool in self.tools.values()
                if tool.original_name == action.tool
                and (tool.connection.name if tool.connection is not None else "") == action.connection_name
            ),
            action.tool,  # gone since (a connection removed): the call says there is no such tool
        )
        deadline = time.monotonic() + settings.ASSISTANT_TOOL_SECONDS
        return self.call(f"approved-{action.pk}", name, action.arguments, 0, deadline, approved=True)


def tool_name(text: str) -> str:
    return _NAME.sub("_", text).strip("_")[:64] or "tool"


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


def _finish(action: Action, result: str, is_error: bool) -> str:
    text = result.replace("\x00", "")
    if len(text) > MAX_RESULT_CHARACTERS:
        text = text[:MAX_RESULT_CHARACTERS] + "… (cut)"
    database(ledger.finish, action, text, is_error)
    return text
