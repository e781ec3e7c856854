"""A delivery's toolbox: the built-in tools, the calendar and mail tools of a connected calendar or mailbox, and
the person's MCP tools. Apart from assistant/tools/__init__.py, which
the tools themselves import (Tool, Call, ToolError), so that the package and its tools import one way."""

import logging

from django.contrib.auth.models import User

from accounts import audit
from accounts.services import profile_of
from assistant.conversation import AssistantRequest
from assistant.tools import Tool, Toolbox, builtin, mailcal, mcp, tool_name
from conversations.models import Delivery, Message
from keys.models import ToolAccess
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_TOOLS_OFFERED = 128  # OpenAI's limit per request; built-in tools come first, then the connections' in order


def toolbox_for(user: User, delivery: Delivery, attempt: int) -> Toolbox:
    box = Toolbox(user=user, delivery=delivery, attempt=attempt, time_zone=profile_of(user).time_zone)
    offered = [*builtin.tools(), *mailcal.tools_of(user), *mcp.tools_of(user)]
    offered = _apply_policy(box, delivery.message, offered)
    if len(offered) > MAX_TOOLS_OFFERED:
        logger.info("user %s has %s tools; the first %s are offered", user.pk, len(offered), MAX_TOOLS_OFFERED)
    for tool in offered[:MAX_TOOLS_OFFERED]:
        box.add(tool)
    return box


def _apply_policy(box: Toolbox, message: Message, offered: list[Tool]) -> list[Tool]:
    """What a key allows for its messages (ApiKey.tool_access), and whether side-effecting tools wait for the
    person's approval: by the key's choice for a key's messages, always for a webhook trigger's, never for what the
    person typed (or a reminder, a channel, a follow-up: the person's own or their tools')."""
    key, trigger = message.api_key, message.trigger
    if key is not None:
        box.needs_approval = key.tools_need_approval
        box.requested_by = audit.by_key(key.name, key.hint)
        if key.tool_access == ToolAccess.NONE:
            return []
        if key.tool_access == ToolAccess.READ_ONLY:
            return [tool for tool in offered if tool.read_only]
        if key.tool_access == ToolAccess.LISTED:
            listed = set(key.allowed_tools or [])
            return [tool for tool in offered if tool_name(tool.name) in listed]
        return offered
    if trigger is not None:
        box.needs_approval = True
        box.requested_by = f"The webhook trigger “{trigger.condition[:80]}” ({trigger.hint})"
    return offered


def offered_tool_names(user: User) -> list[str]:
    """The names of the tools the person's assistant offers now (for choosing a key's list of tools)."""
    return [tool_name(tool.name) for tool in [*builtin.tools(), *mailcal.tools_of(user), *mcp.tools_of(user)]]


def toolbox_for_request(request: AssistantRequest) -> Toolbox | None:
    """The toolbox of the delivery a backend is answering (with the person's time zone); None when the message or
    its person is gone. Read on a database thread (ops/database_work.py): an attempt thread holds no connection."""
    return database(_read_toolbox, request.message_id, request.user_id, request.attempt)


def _read_toolbox(message_id: str, user_id: int, attempt: int) -> Toolbox | None:
    delivery = (
        Delivery.objects.filter(message__public_id=message_id)
        .select_related("message__api_key", "message__trigger")
        .first()
    )
    user = User.objects.filter(pk=user_id).first()
    if delivery is None or user is None:
        return None
    return toolbox_for(user, delivery, attempt)
