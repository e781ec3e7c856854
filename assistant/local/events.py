"""The person's calendar: "what's on my calendar today" lists a span, "add lunch with Sam on Friday at 1pm" drafts an
event (scheduling.py reads its time)."""

import re
from collections.abc import Collection
from datetime import datetime, timedelta

from assistant.local import times
from assistant.local.meaning import Act, Intent, Refuse
from assistant.local.phrases import caseless, is_question_tail, split_when
from assistant.local.scheduling import NO_CALENDAR, Draft

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
_AGENDA = caseless(
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
    rf"|{_CALENDAR_NOUN}{_A_DAY}?)$"
)


_EVENT_NOUNS = (
    r"(?:meetings?|events?|appointments?|plans|calls?|engagements?|get-togethers?|sessions?|classes|class|"
    r"interviews?|lunch|dinner|breakfast|parties|party|standups?|reviews?|syncs?|demos?|birthdays?|anniversar(?:y|ies))"
)
# More questions about the person's days, then a few words of when: "do I have a sales meeting today", "is there
# anything on my calendar for Thursday", "when is my next meeting with Roger", "what's coming up this week".
_ASK_AGENDA = caseless(
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
    rf"|what am i (?:doing|supposed to be doing))(?P<tail>(?:\s+\S+){{0,8}})$"
)


def agenda(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _AGENDA.match(text):
        asked = _ASK_AGENDA.match(text)
        unlike = re.search(r"\b(?:e-?mails?|alarms?|to do|to-do|todo)\b", text, re.I)
        if asked is None or not is_question_tail(asked["tail"]) or unlike:
            return None
    return _agenda_of(text, now, tools)


def _agenda_of(text: str, now: datetime, tools: Collection[str]) -> Intent:
    """The listing of the span ``text`` names."""
    if "calendar_list_events" not in tools:
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


_ADD_EVENT = caseless(
    r"^(?:add|schedule|put|book|create|plan|set up|block|arrange|organi[sz]e|make|set|write down|note down)\s+"
    r"(?:an? event\s+|an? (?:event|meeting|appointment) (?:called|named|for)\s+)?(?:an?\s+|the\s+)?"
    r"(.+)$"
)
_ON_CALENDAR = caseless(r"\s+(?:to|on|in|into) (?:my |the )?calendar\b")
_LENGTH = caseless(r"\s+for (?:(\d{1,3}|an?|one|two|three|half an?) )?(hours?|minutes?|mins?)\b")


# What makes "book …" or "schedule …" an event in the calendar: the calendar named, or an event's noun among the
# first words ("schedule a call with Ana", "book the retro"), or a person to meet ("set up lunch with Sam"). A cab, a
# train, a table or a flight is booked elsewhere: "book a cab to the station in 20 minutes" is no calendar event.
_AN_EVENT = caseless(
    r"^\w+(?: up)?\s+(?:\S+\s+){0,3}?(?:meeting|call|appointment|event|lunch|dinner|breakfast|brunch|"
    r"party|retro|retrospective|review|standup|stand-up|sync|demo|1:1|one-on-one|catch-?up|interview|workshop|"
    r"webinar|conference|class|lesson|session|training|practice|dentist|doctor|check-?up|haircut|date|presentation|"
    r"planning|offsite|visit)s?\b"
)
_WITH_SOMEONE = caseless(r"\bwith (?:(?-i:[A-Z])\w+|my \w+|the \w+ team)\b")
_BOOKED_ELSEWHERE = caseless(
    r"\b(?:cab|taxi|uber|lyft|ola|flights?|train|tickets?|hotel|room|table|restaurant|reservation|rental|car|pto|"
    r"vacation|leave|alarm|timer|list|playlist|song|coffee|party of|phone call|call to|oil|tires?|me on a call)\b"
)


_ADDED_TO_CALENDAR = caseless(
    r"^(?:i (?:would like|want|need) (?:to have )?)?(?:the )?(.+?) (?:needs to be |to be )?(?:added|put) "
    r"(?:to|on|in) (?:my|the) (?:calendar|calender|schedule)(.*)$"
)


def event(text: str) -> Draft | None:
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
    body, minutes = _lasting(found[1])
    what, when = split_when(body)
    if not when and not (on_calendar or _AN_EVENT.match(text)):
        return None  # "add milk": not an event; "schedule a meeting with James": asked when
    return Draft("event", what, when, minutes=max(5, min(minutes, 24 * 60)))


def _lasting(body: str) -> tuple[str, int]:
    """The event's words without its length, and its length in minutes: an hour unless it says ("for 30 minutes")."""
    length = _LENGTH.search(body)
    if length is None:
        return body, 60
    spelled = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0, "half a": 0.5, "half an": 0.5}
    amount = spelled.get((length[1] or "a").lower()) or float(length[1])
    minutes = int(amount * (60 if length[2].lower().startswith("h") else 1))
    return body[: length.start()] + body[length.end() :], minutes


# A question or a request to look, about the person's reminder list or calendar, whatever its other words ("is the
# company party on my list of reminders", "what is showing on my calendar for the 17th of march"): both only list.
_LOOK = caseless(
    r"^(?:what|which|when|where|is|are|was|were|do|does|did|have|has|am|check|search|scan|show|tell|read|list|give|"
    r"go through|walk me through|repeat|pull up|bring up|open|look|let me (?:know|see)|how many|any|can you (?:read|"
    r"check|show|tell|give|see|look|list|pull up)|i (?:want|need|would like|'d like) (?:to )?(?:know|see)|see|hear|"
    r"review|go over|let me hear|do you know|about how many)\b"
)
# Meetings on a day ("are any meetings booked for today", "check to see if I have any meetings with Peter today").
_MEETINGS = caseless(r"\b(?:meetings?|mettings?|appointments?|conferences|gatherings)\b")
# "Do I have a reminder for the AA meeting", "what did I ask to be reminded about": the reminders, listed.
_REMINDERS_ASKED = caseless(
    r"^(?:(?:do i have|is there|are there|did i set|have i set) (?:a|any) reminders? (?:for|about|to|set)\b"
    r"|what (?:\w+ ){0,6}(?:remember|reminded)\b)"
)
_MY_REMINDER_LIST = caseless(r"\b(?:my |the )?(?:reminders? list|list of reminders|reminder list)\b|\bmy reminders\b")
_MY_ALARMS = caseless(r"\b(?:my|any|set) (?:\w+ )?alarms?\b|\balarms? (?:is |are )?set\b|\balarms? situation\b")
_MY_CALENDAR_SAID = caseless(
    r"\b(?:on|in|from|to|of) (?:my|the) (?:\w+ )?(?:calendar|calender|calander|schedule|agenda|diary)\b|"
    r"\bmy (?:calendar|calender|calander|schedule|agenda)\b|\bmy (?:next |upcoming |scheduled )?(?:meetings?|"
    r"appointments?)\b"
)


_NOT_LOOKING = (
    r"\b(?:webhooks?|triggers?|e-?mails?|inbox|remove|delete|clear|add|added|cancel|way to|theaters?|holidays?|"
    r"serviced|free day|schedule an?|set up an?|book an?|put in)\b"
)


def looked_up(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _LOOK.match(text) or re.search(_NOT_LOOKING, text, re.I):
        return None
    if _MY_REMINDER_LIST.search(text) or _MY_ALARMS.search(text) or _REMINDERS_ASKED.match(text):
        return Act("list_reminders", {})
    on_a_day = _MEETINGS.search(text) and re.search(_DAY_WORDS, text, re.I)
    if (_MY_CALENDAR_SAID.search(text) or on_a_day) and not re.search(r"\b(?:sync|share|app|invite)\b", text, re.I):
        return _agenda_of(text, now, tools)
    return None
