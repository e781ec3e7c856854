"""The person's webhooks: listed on request; creating or removing one is the Webhooks page's work."""

from collections.abc import Collection
from datetime import datetime

from assistant.local.meaning import Act, Intent, Refuse
from assistant.local.phrases import NOT_A_NAME, caseless

_HOOKS = r"(?:web ?hooks?|webhook triggers?|triggers)"
_HOOKS_OF = r"(?:(?:all|any|all of|my|the|our|active|current|configured|of)\s+)*"
_LIST_WEBHOOKS = caseless(
    rf"^(?:(?:list|show|see|view|get|check|display|tell me|give me)\s+(?:me\s+)?{_HOOKS_OF}{_HOOKS}"
    rf"(?:\s+(?:i have|i've got|there are|that are set up|you know))?"
    rf"|(?:what|which)(?: are| 're)?\s+{_HOOKS_OF}{_HOOKS}(?:\s+(?:do i have|have i got|are there|are (?:set up|"
    rf"active|configured)|did i (?:set up|add)))?"
    rf"|(?:do i have|have i got|are there)\s+{_HOOKS_OF}{_HOOKS}(?:\s+(?:set up|configured))?"
    rf"|how many {_HOOKS}(?: do i have| are there)?"
    rf"|(?:my\s+)?{_HOOKS})$"
)
# The webhook is the verb's object ("delete my orders webhook"), within a few words of it.
_CHANGE_WEBHOOK = caseless(
    r"^(?:add|create|make|set up|new|delete|remove|revoke|cancel|disable|change|edit|rename|update)\s+"
    rf"(?:(?:a|an|the|my|this|that|new|all|of)\s+)*(?:{NOT_A_NAME}[\w'-]+\s+){{0,2}}{_HOOKS}\b"
)


def webhooks(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if _CHANGE_WEBHOOK.match(text):
        return Refuse("I can't create or remove webhooks myself: the Webhooks page does that.", "change_webhooks")
    if _LIST_WEBHOOKS.match(text):
        return Act("list_webhook_triggers", {})
    return None
