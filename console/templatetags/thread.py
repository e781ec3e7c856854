from typing import Any

from django import template

from console import presentation
from conversations.models import Message

register = template.Library()


@register.filter
def source_label(message: Message) -> str:
    return presentation.source_label(message)


@register.filter
def pretty_json(value: Any) -> str:
    return presentation.pretty_json(value)


@register.filter
def actions_of(message: Message) -> list[Any]:
    return presentation.actions_of(message)
