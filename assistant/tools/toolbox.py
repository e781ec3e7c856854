"""A delivery's toolbox: the built-in tools, the calendar and mail tools of a connected calendar or mailbox, and
the person's MCP tools. Apart from assistant/tools/__init__.py, which
the tools themselves import (Tool, Call, ToolError), so that the package and its tools import one way."""

import logging

from django.contrib.auth.models import User

from accounts import audit
from accounts.services import profile_of
from assistant import origins
from assistant.approval.rule import Origin
from assistant.approval.text import APPROVAL, FOLLOW_UP, GONE_AUTOMATION, THREAD
from assistant.conversation import AssistantRequest
from assistant.tools import Tool, Toolbox, builtin, mailcal, mcp, tool_name
from conversations.models import Delivery, Message, Source
from keys.models import ToolAccess
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_TOOLS_OFFERED = 128  # OpenAI's limit per request; built-in tools come first, then the connections' in order


def toolbox_for(user: User, delivery: Delivery, attempt: int) -> Toolbox:
    box = Toolbox(user=user, delivery=delivery, attempt=attempt, time_zone=profile_of(user).time_zone)
    offered = [*builtin.tools(), *mailcal.tools_of(user), *mcp.tools_of(user)]
    allowed = _apply_policy(box, delivery.message, offered)
    if len(allowed) > MAX_TOOLS_OFFERED:
        logger.info("user %s has %s tools; the first %s are offered", user.pk, len(allowed), MAX_TOOLS_OFFERED)
    for tool in allowed[:MAX_TOOLS_OFFERED]:
        box.add(tool)
    kept = {id(tool) for tool in allowed}
    for tool in offered:
        if id(tool) not in kept:
            box.add(tool, allowed=False)  # the decision refuses it if called (assistant/approval/rule.py)
    return box


def _apply_policy(box: Toolbox, message: Message, offered: list[Tool]) -> list[Tool]:
    """What a key allows for its messages (ApiKey.tool_access), and what the decision weighs for them
    (assistant/approval/rule.py): the message's origin, the key's "don't ask" choice, and whether the message's own
    words came from outside the person (a follow-up, an approval). A follow-up and an approval carry the key or
    trigger of the message that led to them, so their calls stay under its rules."""
    key, trigger = message.api_key, message.trigger
    box.origin = origins.origin_of(message)
    box.read_outside = origins.words_from_outside(message)
    if box.read_outside:
        box.read_from = FOLLOW_UP if message.source == Source.TOOL_FOLLOW_UP else APPROVAL
    if key is not None:
        box.waived = not key.tools_need_approval
        box.requested_by = audit.by_key(key.name, key.hint)
        if key.tool_access == ToolAccess.NONE:
            return []
        if key.tool_access == ToolAccess.READ_ONLY:  # a server's claim to read is not enough for a key
            return [tool for tool in offered if tool.surely_reads]
        if key.tool_access == ToolAccess.LISTED:
            listed = set(key.allowed_tools or [])
            return [tool for tool in offered if tool_name(tool.name) in listed]
        return offered
    if trigger is not None:
        box.requested_by = f"the webhook trigger “{trigger.condition[:80]}” ({trigger.hint})"
    elif box.origin is not Origin.PERSON:
        box.requested_by = GONE_AUTOMATION
    return offered


def offered_tools(user: User) -> list[tuple[str, str]]:
    """The tools the person's assistant offers now, as (name, what it does in its first sentence), for choosing a
    key's list of tools."""
    offered = [*builtin.tools(), *mailcal.tools_of(user), *mcp.tools_of(user)]
    return [(tool_name(tool.name), _first_sentence(tool.description)) for tool in offered]


def _first_sentence(description: str, limit: int = 120) -> str:
    sentence = description.strip().split(". ", 1)[0].strip().rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def toolbox_for_request(request: AssistantRequest, *, reads_thread: bool = False) -> Toolbox | None:
    """The toolbox of the delivery a backend is answering (with the person's time zone); None when the message or
    its person is gone. ``reads_thread``: the backend hands the model the thread, whose words of others count as
    read (assistant/origins.py). Read on a database thread (ops/database_work.py): an attempt thread holds no
    connection."""
    earlier = [entry.id for entry in request.thread if entry.id != request.message_id] if reads_thread else []
    return database(_read_toolbox, request.message_id, request.user_id, request.attempt, earlier)


def _read_toolbox(message_id: str, user_id: int, attempt: int, earlier: list[str]) -> Toolbox | None:
    delivery = (
        Delivery.objects.filter(message__public_id=message_id)
        .select_related("message__api_key", "message__trigger")
        .first()
    )
    user = User.objects.filter(pk=user_id).first()
    if delivery is None or user is None:
        return None
    box = toolbox_for(user, delivery, attempt)
    if not box.read_outside and origins.thread_holds_outside_words(earlier):
        box.read_outside, box.read_from = True, THREAD
    return box
