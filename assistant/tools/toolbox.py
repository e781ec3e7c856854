"""A delivery's toolbox: the built-in tools and the person's MCP tools. Apart from assistant/tools/__init__.py, which
the tools themselves import (Tool, Call, ToolError), so that the package and its tools import one way."""

from django.contrib.auth.models import User

from assistant.tools import Toolbox, builtin, mcp
from conversations.models import Delivery


def toolbox_for(user: User, delivery: Delivery, attempt: int) -> Toolbox:
    box = Toolbox(user=user, delivery=delivery, attempt=attempt)
    for tool in builtin.tools():
        box.add(tool)
    for tool in mcp.tools_of(user):
        box.add(tool)
    return box
