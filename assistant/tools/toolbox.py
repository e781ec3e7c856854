"""A delivery's toolbox: the built-in tools, the calendar and mail tools of a connected calendar or mailbox, and
the person's MCP tools. Apart from assistant/tools/__init__.py, which
the tools themselves import (Tool, Call, ToolError), so that the package and its tools import one way."""

import logging

from django.contrib.auth.models import User

from accounts.services import profile_of
from assistant.conversation import AssistantRequest
from assistant.tools import Toolbox, builtin, mailcal, mcp
from conversations.models import Delivery
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_TOOLS_OFFERED = 128  # OpenAI's limit per request; built-in tools come first, then the connections' in order


def toolbox_for(user: User, delivery: Delivery, attempt: int) -> Toolbox:
    box = Toolbox(user=user, delivery=delivery, attempt=attempt, time_zone=profile_of(user).time_zone)
    offered = [*builtin.tools(), *mailcal.tools_of(user), *mcp.tools_of(user)]
    if len(offered) > MAX_TOOLS_OFFERED:
        logger.info("user %s has %s tools; the first %s are offered", user.pk, len(offered), MAX_TOOLS_OFFERED)
    for tool in offered[:MAX_TOOLS_OFFERED]:
        box.add(tool)
    return box


def toolbox_for_request(request: AssistantRequest) -> Toolbox | None:
    """The toolbox of the delivery a backend is answering (with the person's time zone); None when the message or
    its person is gone. Read on a database thread (ops/database_work.py): an attempt thread holds no connection."""
    return database(_read_toolbox, request.message_id, request.user_id, request.attempt)


def _read_toolbox(message_id: str, user_id: int, attempt: int) -> Toolbox | None:
    delivery = Delivery.objects.filter(message__public_id=message_id).first()
    user = User.objects.filter(pk=user_id).first()
    if delivery is None or user is None:
        return None
    return toolbox_for(user, delivery, attempt)
