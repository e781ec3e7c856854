"""A delivery's toolbox: the built-in tools and the person's MCP tools. Apart from assistant/tools/__init__.py, which
the tools themselves import (Tool, Call, ToolError), so that the package and its tools import one way."""

import logging
from dataclasses import dataclass

from django.contrib.auth.models import User

from accounts.services import profile_of
from assistant.tools import Toolbox, builtin, mcp
from conversations.models import Delivery
from ops.database_work import database

logger = logging.getLogger(__name__)

MAX_TOOLS_OFFERED = 128  # OpenAI's limit per request; built-in tools come first, then the connections' in order


def toolbox_for(user: User, delivery: Delivery, attempt: int) -> Toolbox:
    box = Toolbox(user=user, delivery=delivery, attempt=attempt)
    offered = [*builtin.tools(), *mcp.tools_of(user)]
    if len(offered) > MAX_TOOLS_OFFERED:
        logger.info("user %s has %s tools; the first %s are offered", user.pk, len(offered), MAX_TOOLS_OFFERED)
    for tool in offered[:MAX_TOOLS_OFFERED]:
        box.add(tool)
    return box


@dataclass(frozen=True)
class Workbench:
    """What an attempt needs to call tools: the toolbox and the person's time zone."""

    toolbox: Toolbox | None
    time_zone: str


def workbench_for(message_id: str, user_id: int, attempt: int) -> Workbench:
    """Read on a database thread (ops/database_work.py): an attempt thread holds no connection."""
    return database(_read_workbench, message_id, user_id, attempt)


def _read_workbench(message_id: str, user_id: int, attempt: int) -> Workbench:
    delivery = Delivery.objects.filter(message__public_id=message_id).first()
    user = User.objects.filter(pk=user_id).first()
    if delivery is None or user is None:
        return Workbench(None, "UTC")
    return Workbench(toolbox_for(user, delivery, attempt), profile_of(user).time_zone)
