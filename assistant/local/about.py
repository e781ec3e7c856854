"""What the built-in assistant says about itself: the help, and plain refusals of what it knows it cannot do."""

import re
from collections.abc import Collection
from datetime import datetime

from assistant.local.meaning import Answer, Intent, Refuse
from assistant.local.phrases import NOT_A_NAME, caseless

CAPABILITIES = (
    "I'm the built-in assistant and work without a language model, so I understand only a few requests:\n"
    "- reminders and alarms: “remind me to stretch at 3pm”, “in 20 minutes”, “every weekday at 9”, “wake me up at "
    "half past six”\n"
    "- “what reminders do I have”, “cancel the stretch reminder”, “cancel my 6am alarm”\n"
    "- “what's on my calendar today”, “add lunch with Sam on Friday at 1pm” (with a calendar connected)\n"
    "- “show my unread mail”, “any new mail from Sarah”, “email sam@example.com that I'm running late” (with a "
    "mailbox connected)\n"
    "- “list my webhooks”\n"
    "For anything else, this server needs a model (ASSISTANT_BACKEND=openai) or an assistant runtime."
)
# The answer to a message it did not understand: one short line, and "help" for the whole list.
NOT_UNDERSTOOD = (
    "Sorry, I didn't understand that. Without a language model I understand reminders and alarms (“remind me to "
    "stretch at 3pm”), your calendar and mail when they are connected, and your webhooks: say “help” for examples. "
    "For anything else this server needs a model (ASSISTANT_BACKEND=openai)."
)
_HELP = caseless(
    r"^(?:help|\?|what (?:else )?can you do(?: for me)?|what do you do|what can i (?:ask|say)(?: you)?(?: to do)?|"
    r"commands|menu|how do(?:es)? (?:this|you|it) work|what do you understand|"
    r"what are you (?:able to|capable of)(?: do)?|"
    r"what (?:kinds?|sorts?|types?) of (?:things|questions|requests|stuff) (?:can|may|should) i ask(?: you)?"
    r"(?: about)?|"
    r"what are your (?:capabilities|abilities|skills|features|functions)|how can you help(?: me)?|"
    r"what (?:things|questions|requests) (?:can|may) i ask(?: you)?|what can you help (?:me )?with|who are you|"
    r"what (?:are )?(?:the )?(?:kinds?|sorts?|types?) of (?:things|questions|requests|stuff|tasks|topics) (?:can|may|"
    r"should|could) (?:i|you)\b.{0,40}|what can i ask (?:you )?(?:to|about)\b.{0,40}|"
    r"what (?:else )?can you (?:do|help)\b.{0,40}|what are you (?:able|capable)\b.{0,40}|"
    r"(?:what|which)\b.{0,50}\b(?:can|could|may|should) (?:i|you) (?:ask|help|assist|answer|respond)\b.{0,40}|"
    r"what (?:skills|commands|topics|subjects|questions|information) (?:do|can|are) you\b.{0,40}|"
    r"what are (?:my|your) (?:list of )?commands|what (?:do|can) you know(?: about)?|"
    r"(?:tell me |what are |what's |what is )?(?:the )?(?:\w+ )?(?:kinds?|sorts?|types?|areas?) of (?:things|questions|"
    r"subjects|stuff|topics|tasks)\b.{0,50}\b(?:ask|know|familiar|knowledg\w*|versed|good at|respon\w+)\b.{0,30}|"
    r"what (?:questions|things|tasks) (?:can|may|am|are) (?:i|you) (?:ask|allowed|complete|able)\b.{0,30}|"
    r"can i ask you (?:about )?anything|what do you have answers for)$"
)


SUMMARIZE = caseless(
    r"^(?:(?:give me (?:a|the) (?:summary|gist|tl;?dr) of|what(?:'s| is) the gist of)\s"
    r"|(?:summari[sz]e|sum up|translate|rewrite|rephrase|proofread|paraphrase)(?:\s+(?:this|that|these|it|"
    r"the following|the text|this text|the (?:e-?mail|message|article|document|page|paragraph|thread|log)|for me)\b"
    r"|\s*:|\s+(?:in)?to \w+\s*:)"
    r"|tl;?dr\b)"
)
NOT_SUMMARIZED = Refuse(
    "I can't summarize, translate or rewrite a text: I'm the built-in assistant and work without a language model. "
    "This server needs one for that (ASSISTANT_BACKEND=openai, or an assistant runtime).",
    "summarize",
)
# What it knows it cannot do without a model: other mail than a listing or a dictated one (a mail without a recipient
# included), changing events.
_OTHER_MAIL = caseless(
    r"^(?:forward|reply(?: back)?(?: to)?|answer|respond(?: back)? to|draft a reply to|archive|delete|mark)\s+"
    r"(?:(?:my|the|this|that|all|a|last|latest|new|unread|[\w-]+'s?)\s+)*(?:\S+\s+)?(?:e-?mails?|mails?|messages?)\b"
    r"|^send (?:a |my )?(?:reply|response)\b"
    r"|^(?:send|write|compose|draft|start)\s+(?:an?\s+|a quick\s+)?(?:e-?mail|mail)\b"
)
_EVENT_NOUNS_CHANGED = (
    r"(?:events?|evenets?|meetings?|appointments?|appoitments?|calls?|parties|party|lunch|dinner|breakfast|birthday|"
    r"standups?|hair ?cut|programs?|date|plans?)"
)
_CHANGE_EVENT = caseless(
    r"^(?:delete|remove|cancel|move|reschedule|push back|postpone|rename|erase|dismiss|disregard|clear(?: off)?|"
    r"take|get rid of|drop)\s+(?:(?:my|the|this|that|all|all of|all my|every|next|today's|tomorrow's)\s+)*"
    rf"(?:(?:{NOT_A_NAME}[\w'-]+\s+){{0,3}}{_EVENT_NOUNS_CHANGED}\b|.+\b(?:from|off|on) (?:my |the )?(?:\w+ )?"
    r"(?:calendar|calender|schedule|agenda)\b)"
    r"|^(?:clear|empty|wipe|reset|clean)\s+(?:out\s+)?(?:my|the)\s+(?:whole\s+|entire\s+)?(?:calendar|calender|schedule|"
    r"agenda|day)\b"
)
_CHANGE_CALENDAR = caseless(
    r"^(?:i (?:no longer want|need to|want to)\s+|make sure\s+)?(?:remove|delete|cancel|clear|scratch|erase|undo|"
    r"edit|change|move|reschedule|take)\b.*\b(?:calendar|calender|schedule)\b"
)


_OTHER_MAIL_REFUSED = Refuse(
    "I can't forward, answer or file mail: without a language model I list your unread mail and send a mail you "
    "dictate (“email sam@example.com that …”).",
    "other_mail",
)
_EVENTS_UNCHANGED = Refuse(
    "I can't change or remove calendar events: without a language model I only list and add them.", "change_events"
)
# Answers that never change, each after the requests it answers; the first whose requests match is given.
_ANSWERS = ((_HELP, Answer(CAPABILITIES, "help")), (SUMMARIZE, NOT_SUMMARIZED))
_REFUSALS = (
    (_OTHER_MAIL, _OTHER_MAIL_REFUSED),
    (_CHANGE_EVENT, _EVENTS_UNCHANGED),
    (_CHANGE_CALENDAR, _EVENTS_UNCHANGED),
)


def answer(text: str, now: datetime, tools: Collection[str]) -> Intent:
    """The help, or the refusal to summarize."""
    return _first(_ANSWERS, text)


def known_refusal(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if re.search(r"\b(?:list|reminders?|alarms?|reservations?|reserved)\b", text, re.I):
        return None  # "remove event from my list" is another tool's; reminders are cancelled, not refused
    return _first(_REFUSALS, text)


def _first(answers: tuple[tuple[re.Pattern[str], Answer | Refuse], ...], text: str) -> Intent:
    return next((said for request, said in answers if request.match(text)), None)
