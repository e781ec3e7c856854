"""What the built-in assistant understands, in English: a grammar of requests around the time readers of times.py.
Each message becomes one Intent: a tool call with its arguments (Act), the cancellation of a reminder named by its
words (CancelNamed: a listing, then a cancellation), a question back (Ask), a plain refusal (Refuse), an answer that
needs no tool (Answer), or nothing (None: not understood). Nothing here touches the database: the backend runs the
calls through the Toolbox.

A request is a sentence that asks for something: its verb or its question comes first ("list my webhooks", "what
reminders do I have?", "email bob@example.com that …"). A sentence that only mentions the words of a request ("Hello
from the legacy webhook", "The webhook for orders is broken", "I cleaned my inbox") is no request, and nothing
here matches it. tests/test_local_corpus.py measures that over a corpus of phrasings, intent by intent;
docs/explanation/local-assistant.md has the table."""

import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from assistant.local import times
from assistant.local.phrases import (
    LEAD,
    is_answer,
    is_time_phrase,
    is_time_word,
    plain,
    sentences,
    split_when,
    yours,
)

# Every question about a time ends so: the person's next message, when it is only a time, answers it.
ANSWER_HINT = "(Just reply with the time.)"
CALENDAR_TOOLS = ("calendar_list_events", "calendar_create_event")
MAIL_TOOL = "mail_search"
# A request is a sentence; a longer text is a document or a payload, and the grammar's cost grows with its length.
MAX_REQUEST = 400
NO_CALENDAR = "No calendar is connected: add one under Connections, then ask me again."
NO_MAILBOX = "No mailbox is connected: add one under Connections, then ask me again."


@dataclass(frozen=True, slots=True)
class Act:
    tool: str
    arguments: dict[str, Any]
    done: str = ""  # the reply when the call succeeds; empty: the reply is made from the call's result


@dataclass(frozen=True, slots=True)
class CancelNamed:
    words: str  # words of the reminder's text, or its id; empty: which one is asked


@dataclass(frozen=True, slots=True)
class Ask:
    question: str
    about: str = field(default="", compare=False)  # the intent it is about (INTENTS)


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str
    about: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    about: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Several:
    """Two or three requests in one message ("Remind me to call Sam at 5. What's on my calendar tomorrow?"): each is
    carried out, or asked back about, in turn."""

    intents: tuple["Act | CancelNamed | Ask | Refuse | Answer", ...]


Intent = Act | CancelNamed | Ask | Refuse | Answer | Several | None

# What the built-in assistant understands, by name: the tool an intent calls, or what it answers itself.
INTENTS = (
    "schedule_reminder",
    "list_reminders",
    "cancel_reminder",
    "list_webhook_triggers",
    "change_webhooks",  # refused: the Webhooks page does that
    "calendar_list_events",
    "calendar_create_event",
    "change_events",  # refused: without a model it only lists and adds
    "mail_search",
    "mail_send",
    "other_mail",  # forwarding, replying: refused
    "summarize",  # refused: a text to summarize, translate or rewrite needs a model
    "help",
)


def intent_name(intent: Intent) -> str | None:
    """Which of INTENTS ``intent`` is (None: not understood)."""
    if isinstance(intent, Act):
        return intent.tool
    if isinstance(intent, CancelNamed):
        return "cancel_reminder"
    if isinstance(intent, (Ask, Refuse, Answer)):
        return intent.about or None
    if isinstance(intent, Several):
        return intent_name(intent.intents[0])
    return None


@dataclass(frozen=True, slots=True)
class _Draft:
    """A request that needs a time: a reminder or a calendar event, before the time is read."""

    kind: str  # "reminder" or "event"
    what: str
    when: str = ""
    connector: str = "to"  # remind you to / about / that …
    minutes: int = 60  # an event's length
    extra: dict[str, Any] = field(default_factory=dict)
    notice: bool = False  # "Reminder: …": a notice unless its time reads whole
    report: str = ""  # what the message reported before the request: the reminder's words when it names none


def understand(text: str, now: datetime, tools: Collection[str], earlier: str | None = None) -> Intent:
    """The intent of ``text``. ``now``: the person's local time (naive); ``tools``: the names the toolbox offers;
    ``earlier``: the person's previous message when the assistant's last reply asked them for a time.

    A message is read as a person reads it: sentence by sentence, a request after a report ("Deploy finished. Remind
    me to check the error rate in 30 minutes"), a report alone acts on nothing, and two or three requests are each
    carried out (Several)."""
    request = plain(text)
    if not request:
        return None
    if len(request) > MAX_REQUEST:
        return _summarize(request[:MAX_REQUEST], now, tools)  # a document or a payload, unless it asks for a summary
    if earlier is not None and is_answer(request):
        draft = _draft(plain(earlier))
        if draft is not None:
            return _scheduled(_answered(draft, request, now), now, tools)
    if _SUMMARIZE.match(request):
        return _summarize(request, now, tools)  # the rest is the text to summarize, never requests to act on
    found = _requests(sentences(text), now, tools)
    if len(found) > 1:
        return Several(tuple(found[:MAX_REQUESTS]))
    return found[0] if found else None


def _requests(
    said: list[str], now: datetime, tools: Collection[str]
) -> list[Act | CancelNamed | Ask | Refuse | Answer]:
    """The request of each sentence that has one; the other sentences are its report."""
    found = []
    for index, sentence in enumerate(said):
        intent = _sentence(sentence, now, tools, report=" ".join(said[:index] + said[index + 1 :]))
        if intent is None or isinstance(intent, Several):
            continue
        if isinstance(intent, Answer) and len(said) > 1:
            continue  # "Help! My card was stolen": an exclamation, not a question to us
        found.append(intent)
    return found


MAX_REQUESTS = 3
# Where a request may start inside a sentence, after a report: "The backup failed on db-1: find out why and remind me
# at 9", "Build #512 failed - remind me in an hour to rerun it".
_CLAUSE = re.compile(r"\s*[:;]\s+|\s+[-–—]+\s+|,?\s+(?:and|so|then|also|please)\s+|,\s+")
_REQUEST_START = re.compile(
    r"^(?:please\s+|can you\s+|could you\s+)?(?:remind me|wake me|get me up|set (?:an? |my )?(?:alarm|reminder)|"
    r"what(?:'s| is| are)? (?:on )?my|what reminders|show my|do i have|am i (?:free|busy)|any new|check my|email)\b",
    re.I,
)


def _sentence(sentence: str, now: datetime, tools: Collection[str], report: str) -> Intent:
    """One sentence's request: the whole sentence, or its last clause that starts like a request."""
    intent = _request(sentence, now, tools, report)
    if intent is not None:
        return intent
    for cut in _CLAUSE.finditer(sentence):
        tail = plain(sentence[cut.end() :])
        if _REQUEST_START.match(tail):
            before = f"{report} {sentence[: cut.start()]}".strip()
            return _request(tail, now, tools, before)
    return None


# A question asked inside a request ("tell me what's on my schedule", "let me know if I have any meetings") is read
# as the question itself.
_EMBEDDED = (
    (
        re.compile(
            r"^(?:(?:can you |could you |please )?(?:tell me|let me know|inform me|show me|find out|check)|"
            r"i (?:want|need|would like|'d like) to know)(?: about)?\s+(?=what|when|which|who|how|if|whether|do)",
            re.I,
        ),
        "",
    ),
    (re.compile(r"^(?:if|whether) i have\b", re.I), "do i have"),
    (re.compile(r"^(?:if|whether) there (are|is)\b", re.I), r"\1 there"),
    (re.compile(r"^(?:if|whether) i(?: am|'m)\b", re.I), "am i"),
    (re.compile(r"^(?:if|whether) my (\w+) is\b", re.I), r"is my \1"),
    (re.compile(r"^what i have\b", re.I), "what do i have"),
    (re.compile(r"^(what|when|who|where)'s\b", re.I), r"\1 is"),
    (re.compile(r"^(?:go |please )+(?=check|read|look)", re.I), ""),
    (re.compile(r"^look at\b", re.I), "check"),
    (re.compile(r"^(?:is it possible|would it be possible) (?:for you )?to\s+", re.I), ""),
    (
        re.compile(
            r"^(?:i (?:need|want|would like|'d like)|get me) (an? (?:meeting|call|appointment)\b)(?: to be)?"
            r"(?: scheduled| set up| booked)?",
            re.I,
        ),
        r"schedule \1",
    ),
)


_TIME_FIRST = re.compile(r"^([^,]{2,40}),\s+(.+)$")


def _asked(text: str) -> str:
    for expression, replacement in _EMBEDDED:
        text = expression.sub(replacement, text, count=1)
    first = _TIME_FIRST.match(text)
    if first is not None and is_time_phrase(first[1].split()) and not re.match(r"^remind\b", first[2], re.I):
        return f"{first[2]} {first[1]}"  # "at noon, schedule a meeting with Saul"
    return text


def _request(request: str, now: datetime, tools: Collection[str], report: str = "") -> Intent:
    request = _asked(request)
    readers = (
        _help, _summarize, _cancel, _list_reminders, _webhooks, _agenda, _mail, _send_mail, _known_refusal,
        _looked_up,
    )  # fmt: skip
    for reader in readers:
        intent = reader(request, now, tools)
        if intent is not None:
            return intent
    draft = _draft(request)
    if draft is None:
        return None
    return _scheduled(replace(draft, report=report), now, tools)


# --- what it is, and what it cannot read ----------------------------------------------------------------------------

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
_HELP = re.compile(
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
    r"can i ask you (?:about )?anything|what do you have answers for)$",
    re.I,
)


def _help(text: str, now: datetime, tools: Collection[str]) -> Intent:
    return Answer(CAPABILITIES, "help") if _HELP.match(text) else None


_SUMMARIZE = re.compile(
    r"^(?:(?:give me (?:a|the) (?:summary|gist|tl;?dr) of|what(?:'s| is) the gist of)\s"
    r"|(?:summari[sz]e|sum up|translate|rewrite|rephrase|proofread|paraphrase)(?:\s+(?:this|that|these|it|"
    r"the following|the text|this text|the (?:e-?mail|message|article|document|page|paragraph|thread|log)|for me)\b"
    r"|\s*:|\s+(?:in)?to \w+\s*:)"
    r"|tl;?dr\b)",
    re.I,
)
SUMMARIZE_REFUSAL = (
    "I can't summarize, translate or rewrite a text: I'm the built-in assistant and work without a language model. "
    "This server needs one for that (ASSISTANT_BACKEND=openai, or an assistant runtime)."
)


def _summarize(text: str, now: datetime, tools: Collection[str]) -> Intent:
    return Refuse(SUMMARIZE_REFUSAL, "summarize") if _SUMMARIZE.match(text) else None


# --- reminders --------------------------------------------------------------------------------------------------

_REMIND = re.compile(
    r"^(?:remind me|remind(?= to\b)|(?:don't|do not) let me forget|"
    r"(?:set|add|create|make|schedule|send|set up|give me|i need|i want|i would like|i'd like|can i set|can you set|"
    r"how about|open up)(?: me)? (?:a |an )?(?:new )?reminder(?! e-?mail)(?: set| made)?|new reminder|"
    r"(?:be|get) reminded|"
    r"reminder(?=:| to\b))\b:?\s*(.*)$",
    re.I,
)
# "remind me what the webhook's address is" asks for something now: a question, not a reminder.
_REMIND_QUESTION = re.compile(r"^remind me (?:what|how|who|where|why|which|whether|if)\b", re.I)
_WAKE = re.compile(
    r"^(?:wake me(?: up)?|get me up|(?:i (?:need|want|have) to|make sure i) (?:get|wake) up|"
    r"send me a wake[- ]?up (?:call|alert))\b\s*(.*)$",
    re.I,
)
_ALARM_NOUN = r"(?:alarm(?: clock)?|wake[- ]?up(?: call| alarm| alert)?|alert)"
_SET_ALARM = re.compile(
    r"^(?:(?:set|create|make|add|put|schedule|set up|start|program|give me|i (?:want|need)|turn on)(?: me)?(?: up)?\s+"
    rf"(?:an?\s+|my\s+|the\s+|one\s+)?(?:new\s+)?{_ALARM_NOUN}s?|(?:alarm|wake[- ]?up(?: call)?)(?=\s+(?:for|at)\b))"
    r"\b\s*(.*)$",
    re.I,
)
_ALARM_LEAD = re.compile(r"^(?:on\s+)?(?:(?:that\s+|to\s+)?(?:go(?:es)? off|ring|wake me(?: up)?|get me up)\s+)?", re.I)
_HOUR_WORDS = r"(?:\d|noon|midnight|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|half|quarter)"


def _at_hour(when: str) -> str:
    """ "for 6 tomorrow", "6 am": an alarm's or a wake-up's time said without "at"."""
    return re.sub(rf"^(?:(?:for|at|by)\s+)?(?={_HOUR_WORDS})", "at ", when.strip(), flags=re.I) if when else when


def _in_the_morning(when: str) -> str:
    """Waking up is in the morning: "get me up at 6" is 06:00, not asked about."""
    if times.has_bare_hour(when) and not re.search(
        r"\b(?:[ap]\.?m|morning|afternoon|evening|night|tonight)\b", when, re.I
    ):
        return f"{when} in the morning"
    return when


def _alarm(rest: str) -> _Draft:
    """ "set an alarm for 7am", "put an alarm on for 6 tomorrow morning", "set an alarm for the meeting at 7"."""
    rest = _ALARM_LEAD.sub("", rest.strip())
    name, when = split_when(_at_hour(rest))
    name = re.sub(r"^(?:for|to|at|called|named)\b\s*", "", name.strip(), flags=re.I)
    if when and not split_when(rest)[1]:
        name = ""  # the time was the rest: "for 6"
    return _Draft("reminder", name, when, "alarm")


_WHEN_FIRST = re.compile(r"^(.+?),?\s+remind me\b\s*(.*)$", re.I)
_CONNECTOR = re.compile(r"^(to|about|that|of|for)\s+(.*)$", re.I)
_INNER_CONNECTOR = re.compile(r"\s(to|about|that)\s", re.I)


def _reminder(text: str) -> _Draft | None:
    first = _WHEN_FIRST.match(text)
    if first is not None and is_time_phrase(first[1].split()):
        connector, what = _connected(first[2])
        return _both_times(_Draft("reminder", what, first[1], connector))
    woken = _WAKE.match(text)
    if woken is not None:
        return _Draft("reminder", "wake up", _in_the_morning(_at_hour(woken[1])), "to")
    alarm = _SET_ALARM.match(text)
    if alarm is not None:
        return _alarm(alarm[1])
    found = _REMIND.match(text)
    if found is None or _REMIND_QUESTION.match(text):
        return None
    rest = found[1]
    connected = _CONNECTOR.match(rest)
    if connected is not None and connected[1].lower() == "for":
        rest = connected[2]  # "a reminder for 3pm to stretch", "a reminder for the dentist at 3pm"
    for inner in _INNER_CONNECTOR.finditer(rest):  # "remind me at 3pm to stretch"
        if is_time_phrase(rest[: inner.start()].split()):
            return _both_times(_Draft("reminder", rest[inner.end() :], rest[: inner.start()], inner[1].lower()))
    connector, body = _connected(rest)
    what, when = split_when(body)
    notice = bool(re.match(r"^reminder\b", text, re.I))
    if notice and not when:
        return None  # "Reminder: your invoice is due" is a notice; "Reminder: pay it on Friday at 9am" a request
    if connector == "of" and not when and re.match(r"^remind me of\b", text, re.I):
        return None  # "remind me of the date of my last paycheck" asks for something now
    return _Draft("reminder", what, when, connector, notice=notice)


def _both_times(draft: _Draft) -> _Draft:
    """ "remind me each Friday to submit the timesheet at 4pm": the time said before the text and the one after."""
    what, after = split_when(draft.what)
    return replace(draft, what=what, when=f"{draft.when} {after}") if after else draft


def _connected(text: str) -> tuple[str, str]:
    found = _CONNECTOR.match(text)
    if found is None:
        return "of", text  # "set a reminder: team standup at 9:15", "reminder: take the meds at 9pm": quoted
    return ("about" if found[1].lower() == "for" else found[1].lower()), found[2]


_SOME = r"(?:(?:all|any|all of|my|the|upcoming|active|scheduled|current|pending|open|of)\s+)*"
_WHEN_ASKED = r"(?:\s+(?:today|tomorrow|this week|for (?:today|tomorrow|this week)|set|scheduled|coming up|left|now))?"
_LIST_REMINDERS = re.compile(
    rf"^(?:(?:show|list|see|view|get|check|display|tell me|give me|read)\s+(?:me\s+)?{_SOME}reminders{_WHEN_ASKED}"
    rf"|(?:what|which)(?: are| 're)?\s+{_SOME}reminders(?:\s+(?:do i have|have i got|are there|are (?:set|scheduled|"
    rf"active|left|coming up)|did (?:i|you) set))?{_WHEN_ASKED}"
    rf"|what(?:'s| is| are)\s+(?:on\s+)?my\s+reminders?(?:\s+list)?"
    rf"|(?:do i have|have i got|are there|is there)\s+{_SOME}(?:reminders?|anything to remember){_WHEN_ASKED}"
    rf"|{_SOME}reminders{_WHEN_ASKED})$",
    re.I,
)


_ALARMS = r"(?:alarms?|alerts?|reminders?|wake[- ]?up(?: alarms?| calls?| times?)?)"
# A question about the person's alarms or reminders, then at most a few words of when ("set for tomorrow morning").
_ASK_ALARMS = re.compile(
    rf"^(?:(?:what|which|how many|any)\s+(?:\w+\s+)?{_ALARMS}(?:\s+(?:do|did|have|are|is|i|you))?"
    rf"|(?:show|list|tell me|read|check|see|give me|display|view|review|let me see|let me know)\s+(?:me\s+)?"
    rf"(?:about\s+)?{_SOME}(?:set\s+|\w+\s+)?{_ALARMS}"
    rf"|(?:do i have|have i got|are there|is there|is|are)\s+(?:(?:any|an?|my|all|the)\s+(?:\w+\s+)?)?{_ALARMS}"
    rf"|what(?: is|'s| are) (?:on )?(?:my|the) (?:next |\w+ )?{_ALARMS}(?: list)?"
    rf"|what(?: is|'s) on my list of reminders"
    rf"|(?:at )?what times? (?:is|are|will|does|do|have you set) (?:my|the) (?:\w+\s+)?{_ALARMS}"
    rf"|when (?:is|are) my (?:next )?{_ALARMS}|(?:have i|did you|did i) set (?:any |an |my |the )?{_ALARMS}"
    rf"|(?:show|give|tell) me the list of {_ALARMS}|my (?:set |current )?{_ALARMS}"
    rf"|what {_ALARMS} will (?:wake|go off)|what time is set for my (?:\w+ )?{_ALARMS})(?P<tail>(?:\s+\S+){{0,8}})$",
    re.I,
)
_QUESTION_TAIL = {
    "set", "currently", "right", "now", "scheduled", "planned", "booked", "listed", "coming", "up", "going", "on",
    "my", "for", "the", "this", "next", "in", "at", "between", "to", "until", "any", "there", "me", "already", "yet",
    "left", "remaining", "i", "you", "do", "did", "have", "got", "are", "is", "was", "set?", "active", "upcoming",
    "today's", "tomorrow's", "go", "off", "ring", "morning", "hours", "all", "and", "there?", "what", "they", "it",
    "calendar", "schedule", "agenda", "diary", "free", "busy", "anything", "after", "before", "from", "i've", "been",
    "times", "time", "event", "events", "meeting", "meetings", "appointments", "scheduled?", "please", "available",
    "later", "so", "far", "here", "again", "total", "will", "many", "any?", "they?",
}  # fmt: skip


def is_question_tail(tail: str) -> bool:
    """Whether the words after a question only say when or which ("set for tomorrow morning", "this week")."""
    without_names = re.sub(r"\bwith (?:(?:dr|mr|mrs|ms)\.? |my |the )?[\w'-]+(?: (?:and )?[\w'-]+)?", "", tail.lower())
    words = without_names.replace("?", "").replace(",", "").split()
    return all(word in _QUESTION_TAIL or is_time_word(word) for word in words)


def _list_reminders(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if _LIST_REMINDERS.match(text):
        return Act("list_reminders", {})
    asked = _ASK_ALARMS.match(text)
    if asked is not None and is_question_tail(asked["tail"]) and not re.search(r"\bemails?\b", text, re.I):
        return Act("list_reminders", {})
    return None


# The reminder is the verb's object: "cancel the stretch reminder", "delete my reminder to call Sam", never a word
# further on ("clear my head before the reminder fires").
_NOT_A_NAME = r"(?!(?:before|after|when|if|until|because|so|and|but|since|while|for|from)\b)"
_CANCEL = re.compile(
    r"^(?:cancel|delete|remove|stop|clear|drop|forget|forget about|turn off|switch off|disable|deactivate|unset|"
    r"silence|unschedule|get rid of|i (?:don't|do not|no longer) need)\s+"
    rf"((?:(?:the|my|that|this|these|those|all|every|each|of|any)\s+)*(?:{_NOT_A_NAME}[\w':.-]+\s+){{0,3}}"
    r"(?:reminders?|alarms?|wake[- ]?up(?: calls?| alarms?)?)\b.*"
    r"|rem_[A-Za-z0-9]+)$",
    re.I,
)
_STOP_REMINDING = re.compile(
    r"^(?:stop|don't|do not|no more|quit)\s+remind(?:ing)?\s+me\s+(?:to|about|of)\s+(.+)$", re.I
)
_FILLER = {"the", "my", "a", "an", "reminder", "reminders", "to", "about", "for", "that", "of", "called", "named", "me"}


def _cancel(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _CANCEL.match(text) or _STOP_REMINDING.match(text)
    if found is None:
        return None
    named, _ = split_when(found[1])
    reminder_id = re.search(r"\brem_[A-Za-z0-9]+", named)
    if reminder_id is not None:
        return CancelNamed(reminder_id[0])
    words = [word for word in re.findall(r"[\w'-]+", named.lower()) if word not in _FILLER]
    if words and all(word in {"all", "every", "them", "each", "any"} for word in words):
        words = []  # "cancel all my reminders": one at a time, asked by name
    if re.search(r"\b(?:alarms?|wake[- ]?up)\b", named, re.I):
        # "cancel my 6am alarm": the alarm's time is not in its words; the alarms are asked about by name
        words = [word for word in words if not is_time_word(word) and word not in _ALARM_FILLER] or [
            "wake" if "wake" in named.lower() else "alarm"
        ]
    return CancelNamed(" ".join(words))


_ALARM_FILLER = {"alarm", "alarms", "wake", "up", "wake-up", "calls", "call", "set", "for", "which", "i", "any", "if"}


# --- calendar, mail, webhooks -------------------------------------------------------------------------------------

_HOOKS = r"(?:web ?hooks?|webhook triggers?|triggers)"
_HOOKS_OF = r"(?:(?:all|any|all of|my|the|our|active|current|configured|of)\s+)*"
_LIST_WEBHOOKS = re.compile(
    rf"^(?:(?:list|show|see|view|get|check|display|tell me|give me)\s+(?:me\s+)?{_HOOKS_OF}{_HOOKS}"
    rf"(?:\s+(?:i have|i've got|there are|that are set up|you know))?"
    rf"|(?:what|which)(?: are| 're)?\s+{_HOOKS_OF}{_HOOKS}(?:\s+(?:do i have|have i got|are there|are (?:set up|"
    rf"active|configured)|did i (?:set up|add)))?"
    rf"|(?:do i have|have i got|are there)\s+{_HOOKS_OF}{_HOOKS}(?:\s+(?:set up|configured))?"
    rf"|how many {_HOOKS}(?: do i have| are there)?"
    rf"|(?:my\s+)?{_HOOKS})$",
    re.I,
)
# The webhook is the verb's object ("delete my orders webhook"), within a few words of it.
_CHANGE_WEBHOOK = re.compile(
    r"^(?:add|create|make|set up|new|delete|remove|revoke|cancel|disable|change|edit|rename|update)\s+"
    rf"(?:(?:a|an|the|my|this|that|new|all|of)\s+)*(?:{_NOT_A_NAME}[\w'-]+\s+){{0,2}}{_HOOKS}\b",
    re.I,
)


def _webhooks(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if _CHANGE_WEBHOOK.match(text):
        return Refuse("I can't create or remove webhooks myself: the Webhooks page does that.", "change_webhooks")
    if _LIST_WEBHOOKS.match(text):
        return Act("list_webhook_triggers", {})
    return None


# A question about the person's own days: "what's on my calendar today", "what do I have on Friday", "am I free
# tomorrow", "show my meetings this week". The whole sentence is the question: a lead, what is asked about (their
# calendar, or their meetings), and the day; "what is a calendar" or "show me the events of the deploy" is not one.
_DAY_WORDS = (
    r"(?:today|tonight|tomorrow|this (?:morning|afternoon|evening)|tomorrow (?:morning|afternoon|evening)|"
    r"this week(?:end)?|next week|the rest of (?:the|this) (?:day|week)|"
    r"(?:this |next )?(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]* \d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)? "
    r"(?:of )?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*|the \d{1,2}(?:st|nd|rd|th)|"
    r"the (?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|"
    r"fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-\w+|thirtieth|thirty-first))"
)
_A_DAY = rf"(?:\s+(?:for |on |in |during )?{_DAY_WORDS})"
_CALENDAR_NOUN = r"(?:my|the)\s+(?:calendar|agenda|schedule|diary)"
_MY_CALENDAR = rf"(?:(?:on|in|for)\s+)?{_CALENDAR_NOUN}"
_MY_MEETINGS = r"(?:(?:any|my|all my|all of my)\s+)?(?:meetings|events|appointments|plans|calls)"
_AGENDA = re.compile(
    rf"^(?:(?:what'?s|what is|what's on|what is on|show(?: me)?|list|check|see|view|open|read|get|tell me|give me|"
    rf"anything|is there anything|is anything)\s+{_MY_CALENDAR}{_A_DAY}?(?:\s+look like)?"
    rf"|(?:what|which)\s+(?:meetings|events|appointments|plans|calls)\s+(?:do i have|have i got|are there|are on "
    rf"{_CALENDAR_NOUN}){_A_DAY}?"
    rf"|(?:show(?: me)?|list|check|get|tell me|give me|read)\s+{_MY_MEETINGS}(?:\s+for)?{_A_DAY}?"
    rf"|(?:do i have|have i got|are there|is there)\s+(?:any(?:thing)?\s+)?(?:meetings|events|appointments|plans|"
    rf"calls|anything(?: on| planned| scheduled)?(?: on)?(?: my calendar)?){_A_DAY}?"
    rf"|(?:what do i have|what have i got|what'?s happening|what is happening|what'?s planned|what is planned|"
    rf"what'?s up|what is up|what'?s scheduled|what is scheduled){_A_DAY}(?:\s+on my calendar)?"
    rf"|(?:am i (?:free|busy|available))(?:{_A_DAY}|\s+at \S+(?: (?:am|pm))?)*"
    rf"|what does my (?:day|week|calendar|schedule|agenda)(?:{_A_DAY})? look like"
    rf"|{_CALENDAR_NOUN}{_A_DAY}?)$",
    re.I,
)


_EVENT_NOUNS = (
    r"(?:meetings?|events?|appointments?|plans|calls?|engagements?|get-togethers?|sessions?|classes|class|"
    r"interviews?|lunch|dinner|breakfast|parties|party|standups?|reviews?|syncs?|demos?|birthdays?|anniversar(?:y|ies))"
)
# More questions about the person's days, then a few words of when: "do I have a sales meeting today", "is there
# anything on my calendar for Thursday", "when is my next meeting with Roger", "what's coming up this week".
_ASK_AGENDA = re.compile(
    rf"^(?:(?:do|did) i have (?:a |an |any |anything |something |any other )?(?:\w+\s+)?(?:{_EVENT_NOUNS}|anything|"
    r"something|things?)(?:\s+(?:going on|planned|scheduled|booked|coming up|on))?"
    r"|(?:is|are) there (?:a |an |any )?(?:\w+\s+)?(?:meetings?|appointments?|calls?)"
    rf"|(?:is|are) there (?:a |an |any )?(?:\w+\s+)?{_EVENT_NOUNS}\s+(?:on|in) {_CALENDAR_NOUN}"
    rf"|(?:is|are) there anything (?:on|in) {_CALENDAR_NOUN}"
    rf"|what(?:'s| is| are)? (?:on )?(?:my (?:\w+ )?|the )(?:calendar|calender|schedule|agenda|diary|plans)"
    rf"|what (?:do i have|have i got)(?: going on| planned| scheduled| on| coming up)?"
    rf"|how many (?:\w+ )?{_EVENT_NOUNS} (?:do|will|did) i have"
    rf"|what my (?:day|week|schedule|calendar|agenda) looks? like"
    rf"|what(?:'s| is) (?:coming up|planned|scheduled)(?: for me| on my calendar)?"
    rf"|what (?:{_EVENT_NOUNS}) (?:do i have|have i got|are (?:there|scheduled|planned|coming up)|am i in)"
    rf"|(?:show|tell me|list|read|check|see|give me|open|get|view)(?: me)?(?: about)? (?:all |my |the |any |upcoming |"
    rf"today's |tomorrow's )*(?:calendar|schedule|agenda|{_EVENT_NOUNS})"
    rf"|(?:am i|is my (?:calendar|schedule|day)) (?:free|busy|available|booked|open)"
    rf"|(?:when|what time|what day|on what day) (?:is|are) (?:my|the|that) (?:next )?(?:[\w']+\s+)?{_EVENT_NOUNS}"
    r"|am i scheduled (?:for|to)\b(?:\s+\S+){0,2}?|do i (?:meet|have a meeting) with \S+"
    rf"|any (?:upcoming |new )?{_EVENT_NOUNS}"
    rf"|what does my (?:day|week|weekend|schedule|calendar|agenda|morning|afternoon|evening)(?:\s+\S+){{0,2}} look like"
    rf"|what am i (?:doing|supposed to be doing))(?P<tail>(?:\s+\S+){{0,8}})$",
    re.I,
)


def _agenda(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _AGENDA.match(text):
        asked = _ASK_AGENDA.match(text)
        unlike = re.search(r"\b(?:e-?mails?|alarms?|to do|to-do|todo)\b", text, re.I)
        if asked is None or not is_question_tail(asked["tail"]) or unlike:
            return None
    return _agenda_of(text, now, tools)


def _agenda_of(text: str, now: datetime, tools: Collection[str]) -> Intent:
    """The listing of the span ``text`` names."""
    if CALENDAR_TOOLS[0] not in tools:
        return Refuse(NO_CALENDAR, "calendar_list_events")
    start, end, label = _days(text, now)
    if label == "today" and re.match(r"^when\b", text, re.I):
        start, end, label = now.replace(second=0, microsecond=0), now + timedelta(days=30), "in the next 30 days"
    return Act(
        "calendar_list_events",
        {"start": start.isoformat(timespec="minutes"), "end": end.isoformat(timespec="minutes")},
        done=label,
    )


def _days(text: str, now: datetime) -> tuple[datetime, datetime, str]:
    """The span a question about the calendar means: today unless it names a day or a week."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    named = re.search(_DAY_WORDS, text, re.I)
    said = named[0].lower() if named is not None else ""
    if said.startswith("tomorrow"):
        return midnight + timedelta(days=1), midnight + timedelta(days=2), "tomorrow"
    if said == "next week":
        monday = midnight + timedelta(days=7 - midnight.weekday())
        return monday, monday + timedelta(days=7), "next week"
    if "week" in said:
        return now.replace(second=0, microsecond=0), midnight + timedelta(days=7 - midnight.weekday()), "this week"
    day = times.day_named(said.removeprefix("the "), now) if said and not said.startswith(("to", "this")) else None
    if day is not None:
        return day, day + timedelta(days=1), times.day(day, now)
    return midnight, midnight + timedelta(days=1), "today"


_MAILS = r"(?:e-?mails?|mails?|messages|inbox)"
_CHECK_MAIL = re.compile(
    r"^(?:(?:check|show|read|list|open|get|see|view|display|fetch|give me|tell me)\s+(?:me\s+)?"
    rf"(?:(?:my|the|all|any|all my)\s+)*(?:(?:new|unread|latest|recent|last)\s+)*{_MAILS}"
    r"(?:\s+(?:for me|in my inbox|today|please))?"
    r"|(?:any|got any|do i have(?: any)?|have i got(?: any)?|is there(?: any)?|are there(?: any)?|anything)\s+"
    r"(?:new\s+|unread\s+|important\s+)?(?:e-?mails?|mail|messages|in my inbox)(?:\s+(?:for me|in my inbox|today))?"
    r"|(?:what'?s|what is|anything) new in my inbox|(?:what'?s|what is|is there anything|anything) in my inbox"
    r"|how many (?:new |unread )?(?:e-?mails?|mails|messages)(?: do i have| have i got| are there)?(?: in my inbox)?"
    r"|(?:my\s+)?(?:unread|new|latest|recent)\s+(?:e-?mails?|mail|messages)"
    r"|(?:my\s+)?inbox|(?:who|has anyone) (?:e-?mailed|written to|wrote to) me(?: today)?)$",
    re.I,
)


_MAIL_WORDS = r"(?:e-?mails?|mails?|messages|inbox|gmail|outlook)"
_NOT_WHEN = r"(?!(?:today|yesterday|recently|lately|since|last|this|for|in|about|on|at|please|now|so|to|me)\b)"
_SENDER = rf"{_NOT_WHEN}[\w.@'-]+(?: {_NOT_WHEN}[\w.'-]+)?"
_FROM = rf"(?:\s+(?:from|by)\s+{_SENDER})?"
# Questions about the inbox, then a few words of when: "any new mail from sarah", "who sent me email today", "did I
# get an email from Sandy", "did Paul email me recently", "what's the latest email from Amazon".
_ASK_MAIL = re.compile(
    r"^(?:(?:do i have|have i got|did i get|did i receive|have i received|have i gotten|is there|are there|any|got any|"
    r"anything)\s+(?:any\s+|a\s+|an\s+)?(?:(?:new|unread|recent|latest|important)\s+)*(?:e-?mails?|mail|messages)"
    rf"{_FROM}"
    r"|(?:check|read|show|open|display|list|get|fetch|see|view|find|give me)(?: me)? (?:(?:all|my|the|any|new|unread|"
    rf"latest|recent|newest|last|most recent)\s+)*{_MAIL_WORDS}{_FROM}"
    rf"|who (?:has |have )?(?:e-?mailed|sent|wrote|written)(?: me| to me)?(?: (?:an? |any )?{_MAIL_WORDS})?(?: me)?"
    r"|(?:did|has) (?!i\b|you\b)(?P<writer>\w+(?: \w+)?) "
    r"(?:e-?mail(?:ed)?|sen[dt] me (?:an? )?(?:e-?mail|mail|message)s?|"
    r"wr(?:ite|ote|itten) (?:to )?me|sen[dt] me any (?:new )?(?:e-?mails?|mail|messages))(?: me)?"
    r"|what(?:'s| is| are) (?:my |the )?(?:new|newest|latest|last|most recent|unread)(?: \w+)? "
    rf"(?:e-?mails?|mail|messages){_FROM}"
    rf"|how many (?:new |unread )?(?:e-?mails?|mails|messages)(?: do i have| have i got| did i get| are there)?{_FROM}"
    rf"|what (?:new |unread )?(?:e-?mails?|messages) (?:do i have|have i got|did i get){_FROM}"
    rf"|(?:have|has) (?:any|there been any) (?:new )?(?:e-?mails?|mail|messages) (?:come in|arrived)"
    rf"|(?:inform|update|tell) me (?:of|on|about) (?:my )?(?:new |unread )?(?:e-?mails?|mail|inbox){_FROM}"
    r"|(?:check|scan|search|look through|go through)(?: (?:my|the|by))?(?: (?:inbox|e-?mails?|mail))? for "
    r"(?:all |any )?"
    rf"(?:new |unread |recent )?(?:e-?mails?|mail|messages){_FROM})"
    r"(?P<tail>(?:\s+\S+){0,6})$",
    re.I,
)
_MAIL_TAIL = {
    "today", "yesterday", "recently", "lately", "since", "last", "hour", "this", "morning", "week", "for", "me", "in",
    "my", "inbox", "please", "now", "right", "yet", "so", "far", "the", "at", "moment", "new", "unread", "email",
    "emails", "mail", "from", "hours", "days", "afternoon", "evening", "i", "checked", "to", "on", "any", "received",
    "got", "get", "gotten", "minutes", "night", "come", "after", "before", "noon", "time", "all",
}  # fmt: skip


def _mail(text: str, now: datetime, tools: Collection[str]) -> Intent:
    asked = None if _CHECK_MAIL.match(text) else _ASK_MAIL.match(text)
    if asked is None and not _CHECK_MAIL.match(text):
        return None
    tail = re.sub(r"\b(?:about|regarding) .+$", "", asked["tail"].lower()) if asked is not None else ""
    if not all(word in _MAIL_TAIL or is_time_word(word) for word in tail.split()):
        return None
    if MAIL_TOOL not in tools:
        return Refuse(NO_MAILBOX, MAIL_TOOL)
    return Act(MAIL_TOOL, _mail_filters(text, asked, now))


def _mail_filters(text: str, asked: re.Match[str] | None, now: datetime) -> dict[str, Any]:
    """What to search for: unread mail unless the question names a sender or a day ("who emailed me today")."""
    filters: dict[str, Any] = {}
    named = re.search(rf"\b(?:from|by)\s+({_SENDER})", text, re.I)
    sender = (named[1] if named is not None else "") or (asked["writer"] if asked is not None else "")
    if sender and sender.split()[0].lower() not in {"my", "me", "anyone", "someone", "anybody", "somebody", "the"}:
        filters["from"] = sender
    topic = re.search(r"\b(?:about|regarding) ((?:\S+ ?){1,5})$", asked["tail"] if asked is not None else "", re.I)
    if topic is not None:
        filters["text"] = re.sub(r"^(?:the|my|a|an) ", "", topic[1].strip(), flags=re.I)
    since = re.search(r"\b(today|yesterday|this week)\b", text, re.I)
    if since is not None:
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        back = {"today": 0, "yesterday": 1, "this week": now.weekday()}[since[1].lower()]
        filters["since"] = (midnight - timedelta(days=back)).date().isoformat()
    if not filters or re.search(r"\b(?:new|unread)\b", text, re.I):
        filters["unseen"] = True
    return filters


# "email bob@example.com that I'm running late", "send an email to bob@example.com saying …", "write to
# bob@example.com: …": the mail is composed here and sent only once the person approves it.
_ADDRESS = r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+"
# An address, or a name written with a capital ("Bob", "Bob Smith"): "mail delivery failed: …" names nobody.
_RECIPIENT = r"([\w.+'-]+@[\w-]+(?:\.[\w-]+)+|(?-i:[A-Z][\w'-]*)(?:\s+(?-i:[A-Z][\w'-]*))?)"
_SAYING = (
    r"(?:\s*[:,]\s*|\s+(?:that|saying|to say|and say|and tell (?:him|her|them)(?: that)?|"
    r"telling (?:him|her|them)(?: that)?)\s+|\s+(?=about\b))"
)
_MAIL_NOUN = r"(?:an?\s+|a quick\s+)?(?:e-?mail|mail|message|note|line)"
_SEND_MAIL = re.compile(
    rf"^(?:(?:e-?mail|mail)\s+{_RECIPIENT}"
    rf"|(?:send|write|shoot|drop|compose)\s+(?:{_MAIL_NOUN}\s+to\s+{_RECIPIENT}|{_RECIPIENT}\s+{_MAIL_NOUN})"
    rf"|(?:write|reply)\s+to\s+{_RECIPIENT}"
    rf"|tell\s+{_RECIPIENT}\s+(?:by|via|in an|over)\s+e-?mail)"
    rf"(?:{_SAYING}(.*))?$",
    re.I,
)
# A mail to someone named without an address ("email my boss that I'll be late", "send an email to sandy"): asked
# for the address.
_NOT_SOMEONE = (
    r"(?!(?:is|was|are|the|a|an|it|this|that|me|server|address|sent|from|to|not|still|down|works?|template|client|"
    r"app|list|and|for|in|on|me|with|again|notifications?|settings?|account|box|inbox)\b)"
)
_SEND_MAIL_NAMED = re.compile(
    r"^(?:e-?mail|(?:send|write|prepare|start|compose|draft|open) (?:an? |the |a new |a quick )?(?:e-?mail|mail) "
    rf"(?:to|for))\s+(my \w+|{_NOT_SOMEONE}[\w'-]+(?: (?-i:[A-Z])\w+)?)"
    r"(?:\s+(?:that|to|about|and|saying|asking|telling|how|with|if|:)\b.*|:.*)?$"
    r"|^tell ([\w'-]+) .+ (?:through|by|via|over|in an) e-?mail$"
    rf"|^send ({_NOT_SOMEONE}\w+) (?:an? |the following )?e-?mail\b.*$",
    re.I,
)
_SUBJECT_LIMIT = 60


def _send_mail(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _SEND_MAIL.match(text)
    if found is None:
        named = _SEND_MAIL_NAMED.match(text)
        if named is None:
            return None
        if "mail_send" not in tools:
            return Refuse(NO_MAILBOX, "mail_send")
        return _address_needed(next(group for group in named.groups() if group))
    recipient = next(group for group in found.groups()[:-1] if group)
    said = (found.groups()[-1] or "").strip()
    if "mail_send" not in tools:
        return Refuse(NO_MAILBOX, "mail_send")
    if not re.fullmatch(_ADDRESS, recipient):
        return _address_needed(recipient)
    about = re.match(r"^about\s+(.+?)(?:\s*[:,]\s*|\s+(?:saying|that)\s+)(.+)$|^about\s+(.+)$", said, re.I)
    subject, body = _subject_of(said), said
    if about is not None:
        subject, body = (about[1], about[2]) if about[1] else (about[3], "")
    if not body:
        question = f"What should the mail to {recipient} say? Say “email {recipient} that …” with its text."
        return Ask(question, "mail_send")
    body = body[:1].upper() + body[1:]
    if not body.endswith((".", "!", "?")):
        body += "."
    subject = subject[:1].upper() + subject[1:]
    return Act("mail_send", {"to": recipient, "subject": subject, "body": body})  # the person confirms every mail


def _address_needed(recipient: str) -> Refuse:
    example = re.sub(r"[^\w]", "", recipient.split()[-1].lower()) or "sam"
    return Refuse(
        f"I need {yours(recipient)}'s email address: say “email {example}@example.com that …” with their address "
        "(without a language model I cannot look it up).",
        "mail_send",
    )


def _subject_of(body: str) -> str:
    """A subject from the mail's own words: "I'm running late" is about "Running late"."""
    words = re.sub(r"^(?:i'm|i am|i'll|i will|we're|we are|just|hi|hello|hey)\s+", "", body.strip(), flags=re.I)
    words = words.split(".")[0].split("\n")[0].strip(" ,!?")
    if len(words) > _SUBJECT_LIMIT:
        words = words[:_SUBJECT_LIMIT].rsplit(" ", 1)[0] + "…"
    return words


_ADD_EVENT = re.compile(
    r"^(?:add|schedule|put|book|create|plan|set up|block|arrange|organi[sz]e|make|set|write down|note down)\s+"
    r"(?:an? event\s+|an? (?:event|meeting|appointment) (?:called|named|for)\s+)?(?:an?\s+|the\s+)?"
    r"(.+)$",
    re.I,
)
_ON_CALENDAR = re.compile(r"\s+(?:to|on|in|into) (?:my |the )?calendar\b", re.I)
_LENGTH = re.compile(r"\s+for (?:(\d{1,3}|an?|one|two|three|half an?) )?(hours?|minutes?|mins?)\b", re.I)


# What makes "book …" or "schedule …" an event in the calendar: the calendar named, or an event's noun among the
# first words ("schedule a call with Ana", "book the retro"), or a person to meet ("set up lunch with Sam"). A cab, a
# train, a table or a flight is booked elsewhere: "book a cab to the station in 20 minutes" is no calendar event.
_AN_EVENT = re.compile(
    r"^\w+(?: up)?\s+(?:\S+\s+){0,3}?(?:meeting|call|appointment|event|lunch|dinner|breakfast|brunch|"
    r"party|retro|retrospective|review|standup|stand-up|sync|demo|1:1|one-on-one|catch-?up|interview|workshop|"
    r"webinar|conference|class|lesson|session|training|practice|dentist|doctor|check-?up|haircut|date|presentation|"
    r"planning|offsite|visit)s?\b",
    re.I,
)
_WITH_SOMEONE = re.compile(r"\bwith (?:(?-i:[A-Z])\w+|my \w+|the \w+ team)\b", re.I)
_BOOKED_ELSEWHERE = re.compile(
    r"\b(?:cab|taxi|uber|lyft|ola|flights?|train|tickets?|hotel|room|table|restaurant|reservation|rental|car|pto|"
    r"vacation|leave|alarm|timer|list|playlist|song|coffee|party of|phone call|call to|oil|tires?|me on a call)\b",
    re.I,
)


_ADDED_TO_CALENDAR = re.compile(
    r"^(?:i (?:would like|want|need) (?:to have )?)?(?:the )?(.+?) (?:needs to be |to be )?(?:added|put) "
    r"(?:to|on|in) (?:my|the) (?:calendar|calender|schedule)(.*)$",
    re.I,
)


def _event(text: str) -> _Draft | None:
    added = _ADDED_TO_CALENDAR.match(text)
    if added is not None:
        text = f"add {added[1]}{added[2]} to my calendar"  # "the staff meeting on march 1 at 10am needs to be added …"
    found = _ADD_EVENT.match(_ON_CALENDAR.sub("", text))
    if found is None or "reminder" in text.lower():
        return None
    on_calendar = _ON_CALENDAR.search(text) is not None
    if not on_calendar and (
        _BOOKED_ELSEWHERE.search(text) or not (_AN_EVENT.match(text) or _WITH_SOMEONE.search(text))
    ):
        return None  # "put the washing on at 3pm", "book a cab at 5": not about the calendar
    body, minutes = found[1], 60
    length = _LENGTH.search(body)
    if length is not None:
        spelled = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0, "half a": 0.5, "half an": 0.5}
        amount = spelled.get((length[1] or "a").lower()) or float(length[1])
        minutes = int(amount * (60 if length[2].lower().startswith("h") else 1))
        body = body[: length.start()] + body[length.end() :]
    what, when = split_when(body)
    if not when and not (on_calendar or _AN_EVENT.match(text)):
        return None  # "add milk": not an event; "schedule a meeting with James": asked when
    return _Draft("event", what, when, minutes=max(5, min(minutes, 24 * 60)))


# --- scheduling a draft ---------------------------------------------------------------------------------------------


def _draft(text: str) -> _Draft | None:
    return _reminder(text) or _event(text)


def _answered(draft: _Draft, answer: str, now: datetime) -> _Draft:
    """The draft with the time the person gave in answer to our question."""
    meridiem = re.fullmatch(r"(?:in the )?(am|pm|a\.m\.?|p\.m\.?|morning|afternoon|evening)", answer, re.I)
    if meridiem is not None and times.has_bare_hour(draft.when):
        word = meridiem[1].lower().replace(".", "")
        suffix = {"morning": "am", "afternoon": "pm", "evening": "pm"}.get(word, word)
        return replace(draft, when=times.with_meridiem(draft.when, suffix))
    if not LEAD.match(answer.split()[0]):
        answer = f"at {answer}"
    combined = f"{times.without_bare_hour(draft.when)} {answer}".strip()
    try:
        times.read(combined, now)
    except (times.Unclear, times.Impossible):
        return replace(draft, when=answer)
    return replace(draft, when=combined)


def _scheduled(draft: _Draft, now: datetime, tools: Collection[str]) -> Intent:
    about = "schedule_reminder" if draft.kind == "reminder" else CALENDAR_TOOLS[1]
    if draft.kind == "event" and CALENDAR_TOOLS[1] not in tools:
        return Refuse(NO_CALENDAR, about)
    what = draft.what.strip(" ,") or _shortened(draft.report)
    if not what and draft.connector == "alarm":
        what = "alarm"
    action = _action(draft, what)
    if not what:
        question = "What should I remind you of?" if draft.kind == "reminder" else "What should I call the event?"
        return Ask(question, about)
    if not draft.when:
        return None if draft.notice else Ask(f"When should I {action}? {ANSWER_HINT}", about)
    try:
        when = times.read(draft.when, now)
    except times.Unclear as unclear:
        if draft.notice:
            return None  # "Reminder: your invoice is due on Friday" tells; it does not ask
        return Ask(f"{unclear.question.format(action=action)} {ANSWER_HINT}", about)
    except times.Impossible as impossible:
        return Refuse(str(impossible), about)
    if draft.kind == "event":
        return _event_call(what, when, draft.minutes, now)
    return _reminder_call(what, when, action, now)


_REPORT_LIMIT = 120


def _shortened(report: str) -> str:
    """A report as a reminder's words: "remind me at 9" after "The nightly backup failed on db-1"."""
    report = report.strip(" ,:;-")
    if len(report) <= _REPORT_LIMIT:
        return report
    return report[:_REPORT_LIMIT].rsplit(" ", 1)[0] + "…"


def _action(draft: _Draft, what: str) -> str:
    if draft.connector == "alarm":
        return "ring your alarm" if what.lower() == "alarm" else f"ring your alarm for {yours(what)}"
    if draft.kind == "event":
        return f"put “{what[:1].upper()}{what[1:]}” in your calendar"
    if draft.connector == "of":  # the person's own words, which may be a noun or a verb: said back as a quote
        return f"remind you of “{yours(what)}”"
    return f"remind you {draft.connector} {yours(what)}"


def _reminder_call(what: str, when: times.When, action: str, now: datetime) -> Act:
    text = what[0].upper() + what[1:]
    if isinstance(when, times.Once):
        arguments = {"text": text, "when": when.at.isoformat(timespec="minutes")}
        return Act("schedule_reminder", arguments, done=f"Okay! I'll {action} {times.spoken(when.at, now)}.")
    arguments = {"text": text, "when": when.first.isoformat(timespec="minutes"), "rrule": when.rule}
    starting = f", starting {times.day(when.first, now).removeprefix('on ')}" if "hour" not in when.label else ""
    return Act("schedule_reminder", arguments, done=f"Okay! I'll {action} {when.label}{starting}.")


def _event_call(what: str, when: times.When, minutes: int, now: datetime) -> Act:
    summary = what[0].upper() + what[1:]
    start = when.at if isinstance(when, times.Once) else when.first
    arguments: dict[str, Any] = {
        "summary": summary,
        "start": start.isoformat(timespec="minutes"),
        "end": (start + timedelta(minutes=minutes)).isoformat(timespec="minutes"),
    }
    if isinstance(when, times.Repeating):
        arguments["rrule"] = when.rule
        said = f"{when.label}, starting {times.spoken(start, now)}"
    else:
        said = times.spoken(start, now)
    return Act("calendar_create_event", arguments, done=f"Added “{summary}” to your calendar {said}.")


# A question or a request to look, about the person's reminder list or calendar, whatever its other words ("is the
# company party on my list of reminders", "what is showing on my calendar for the 17th of march"): both only list.
_LOOK = re.compile(
    r"^(?:what|which|when|where|is|are|was|were|do|does|did|have|has|am|check|search|scan|show|tell|read|list|give|"
    r"go through|walk me through|repeat|pull up|bring up|open|look|let me (?:know|see)|how many|any|can you (?:read|"
    r"check|show|tell|give|see|look|list|pull up)|i (?:want|need|would like|'d like) (?:to )?(?:know|see)|see|hear|"
    r"review|go over|let me hear|do you know|about how many)\b",
    re.I,
)
# Meetings on a day ("are any meetings booked for today", "check to see if I have any meetings with Peter today").
_MEETINGS = re.compile(r"\b(?:meetings?|mettings?|appointments?|conferences|gatherings)\b", re.I)
# "Do I have a reminder for the AA meeting", "what did I ask to be reminded about": the reminders, listed.
_REMINDERS_ASKED = re.compile(
    r"^(?:(?:do i have|is there|are there|did i set|have i set) (?:a|any) reminders? (?:for|about|to|set)\b"
    r"|what (?:\w+ ){0,6}(?:remember|reminded)\b)",
    re.I,
)
_MY_REMINDER_LIST = re.compile(
    r"\b(?:my |the )?(?:reminders? list|list of reminders|reminder list)\b|\bmy reminders\b", re.I
)
_MY_ALARMS = re.compile(r"\b(?:my|any|set) (?:\w+ )?alarms?\b|\balarms? (?:is |are )?set\b|\balarms? situation\b", re.I)
_MY_CALENDAR_SAID = re.compile(
    r"\b(?:on|in|from|to|of) (?:my|the) (?:\w+ )?(?:calendar|calender|calander|schedule|agenda|diary)\b|"
    r"\bmy (?:calendar|calender|calander|schedule|agenda)\b|\bmy (?:next |upcoming |scheduled )?(?:meetings?|"
    r"appointments?)\b",
    re.I,
)


_NOT_LOOKING = (
    r"\b(?:webhooks?|triggers?|e-?mails?|inbox|remove|delete|clear|add|added|cancel|way to|theaters?|holidays?|"
    r"serviced|free day|schedule an?|set up an?|book an?|put in)\b"
)


def _looked_up(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _LOOK.match(text) or re.search(_NOT_LOOKING, text, re.I):
        return None
    if _MY_REMINDER_LIST.search(text) or _MY_ALARMS.search(text) or _REMINDERS_ASKED.match(text):
        return Act("list_reminders", {})
    on_a_day = _MEETINGS.search(text) and re.search(_DAY_WORDS, text, re.I)
    if (_MY_CALENDAR_SAID.search(text) or on_a_day) and not re.search(r"\b(?:sync|share|app|invite)\b", text, re.I):
        return _agenda_of(text, now, tools)
    return None


# --- what it knows it cannot do -------------------------------------------------------------------------------------

_OTHER_MAIL = re.compile(
    r"^(?:forward|reply(?: back)?(?: to)?|answer|respond(?: back)? to|draft a reply to|archive|delete|mark)\s+"
    r"(?:(?:my|the|this|that|all|a|last|latest|new|unread|[\w-]+'s?)\s+)*(?:\S+\s+)?(?:e-?mails?|mails?|messages?)\b"
    r"|^send (?:a |my )?(?:reply|response)\b"
    r"|^(?:send|write|compose|draft|start)\s+(?:an?\s+|a quick\s+)?(?:e-?mail|mail)\b",  # without a recipient
    re.I,
)
_EVENT_NOUNS_CHANGED = (
    r"(?:events?|evenets?|meetings?|appointments?|appoitments?|calls?|parties|party|lunch|dinner|breakfast|birthday|"
    r"standups?|hair ?cut|programs?|date|plans?)"
)
_CHANGE_EVENT = re.compile(
    r"^(?:delete|remove|cancel|move|reschedule|push back|postpone|rename|erase|dismiss|disregard|clear(?: off)?|"
    r"take|get rid of|drop)\s+(?:(?:my|the|this|that|all|all of|all my|every|next|today's|tomorrow's)\s+)*"
    rf"(?:(?:{_NOT_A_NAME}[\w'-]+\s+){{0,3}}{_EVENT_NOUNS_CHANGED}\b|.+\b(?:from|off|on) (?:my |the )?(?:\w+ )?"
    r"(?:calendar|calender|schedule|agenda)\b)"
    r"|^(?:clear|empty|wipe|reset|clean)\s+(?:out\s+)?(?:my|the)\s+(?:whole\s+|entire\s+)?(?:calendar|calender|schedule|"
    r"agenda|day)\b",
    re.I,
)


_CHANGE_CALENDAR = re.compile(
    r"^(?:i (?:no longer want|need to|want to)\s+|make sure\s+)?(?:remove|delete|cancel|clear|scratch|erase|undo|"
    r"edit|change|move|reschedule|take)\b.*\b(?:calendar|calender|schedule)\b",
    re.I,
)


def _known_refusal(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if re.search(r"\b(?:list|reminders?|alarms?|reservations?|reserved)\b", text, re.I):
        return None  # "remove event from my list" is another tool's; reminders are cancelled, not refused
    if _OTHER_MAIL.search(text):
        return Refuse(
            "I can't forward, answer or file mail: without a language model I list your unread mail and send a mail "
            "you dictate (“email sam@example.com that …”).",
            "other_mail",
        )
    if _CHANGE_EVENT.search(text) or _CHANGE_CALENDAR.search(text):
        return Refuse(
            "I can't change or remove calendar events: without a language model I only list and add them.",
            "change_events",
        )
    return None
