"""The words around a request: what is politeness, what is a time phrase ("at 3pm", "every Monday at 8am") and where
it starts in a sentence, and a person's words said back to them. Recognising a time phrase here only finds where it
is; reading it is times.py's (dateparser's) work."""

import itertools
import re


def caseless(pattern: str) -> re.Pattern[str]:
    """A pattern of words, matched whatever their case: every pattern of a request is one."""
    return re.compile(pattern, re.I)


_POLITE = caseless(
    r"^(?:(?:hey|hi|hello|ok|okay|so|and|also)\b[,!]?\s+)*"
    r"(?:(?:please|pls|kindly|can you|could you|would you|will you|i want you to|i'd like you to|i want to|"
    r"i'd like to|i would like to|i need to|i need you to|help me|i wanna|i gotta|i must|i have to|i got to|"
    r"i shall|go ahead and|see if you can)\b[,]?\s+)*"
)
_THANKS = caseless(r"(?:[\s,]+(?:please|pls|thanks|thank you|thx))+\s*$")


# A voice assistant's name said to it ("Olly, check my email", "what alarms are set, Echo").
_CALLED = r"(?:olly|pda|siri|echo|alexa|google|hey google|ok google|hey siri|computer|assistant|bot)"
_CALLED_FIRST = caseless(rf"^{_CALLED}\b[,:!]?\s+")
_CALLED_LAST = caseless(rf"[,\s]+{_CALLED}$")


def plain(text: str) -> str:
    text = " ".join(str(text or "").replace("’", "'").replace("“", '"').replace("”", '"').split())
    text = text.rstrip(" .!?")
    text = _THANKS.sub("", _CALLED_LAST.sub("", _CALLED_FIRST.sub("", text)))
    return _POLITE.sub("", text).rstrip(" .!?,")


# Where one sentence ends: ".", "!" or "?" before a space, or a line break; never after "a.m." or "e.g.".
_SENTENCE_END = re.compile(r"[.!?]+(?=\s)|\n+")
_ABBREVIATION = caseless(r"(?:\b[ap]\.m|\be\.g|\bi\.e|\bmr|\bmrs|\bms|\bdr|\bst|\bvs|\bno|\betc|\bapprox)\.$")
MAX_SENTENCES = 8  # a longer message is a document, not requests


def sentences(text: str) -> list[str]:
    """The message's sentences, each as plain() makes it; empty ones dropped."""
    found, start = [], 0
    text = str(text or "")
    for end in _SENTENCE_END.finditer(text):
        if _ABBREVIATION.search(text[start : end.end()]):
            continue
        found.append(text[start : end.end()])
        start = end.end()
    found.append(text[start:])
    return [sentence for sentence in map(plain, found[:MAX_SENTENCES]) if sentence]


LEADS = (
    r"at|on|in|by|around|this|next|today|tonight|tomorrow|every|each|daily|weekly|monthly|hourly|yearly|nightly|"
    r"weekdays|weekends|noon|midnight|(?:mon|tue|tues|wed|wednes|thu|thur|thurs|fri|sat|satur|sun)(?:day)?s?|"
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?|\d{1,2}(?:[:.]\d{2})?\s?(?:am|pm)|\d{1,2}[:.]\d{2}|\d{1,2}[/-]\d{1,2}(?:[/-]\d{2,4})?|"
    r"\d{4}-\d{2}-\d{2}"
)
LEAD = caseless(rf"^(?:{LEADS})$")
_TIME_WORD = caseless(
    rf"^(?:{LEADS}|coming|other|and|&|the|of|a|an|from|starting|except|but|not|or|sharp|morning|afternoon|evening|night|"
    r"days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|half|quarter|weekdays?|weekends?|workdays?|week ?day|"
    r"everyday|annually|am|pm|a\.m\.?|p\.m\.?|o'?clock|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|fifteen|twenty|thirty|forty|forty-five|fifty|\d{1,2}(?:st|nd|rd|th)|\d{1,4}|past|hrs|a\.?m\.?|p\.?m\.?|"
    r"\d{1,2}:\d\d(?:[ap]m)?|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
    r"thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|"
    r"(?:twenty|thirty)-?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)|thirteen|fourteen|sixteen|"
    r"seventeen|eighteen|nineteen|tonight)$"
)
_PREPOSITIONS = {"at", "on", "in", "by", "around", "from"}


def is_time_word(word: str) -> bool:
    """A word a time phrase may hold: "at", "6:30", "tomorrow", "thirteenth", "half"."""
    return _TIME_WORD.match(word) is not None


def is_time_phrase(words: list[str]) -> bool:
    """Every word a time word, starting like a time ("at", "tomorrow", "every", "3pm"), and no preposition followed
    by another ("put the washing on at 3pm": "on at 3pm" is not the time, "at 3pm" is)."""
    if not words or not LEAD.match(words[0]):
        return False
    quarter_to = {index for index, word in enumerate(words) if word == "to" and index and words[index - 1] == "quarter"}
    if not all(_TIME_WORD.match(word.strip(",")) or index in quarter_to for index, word in enumerate(words)):
        return False
    return not any(a.lower() in _PREPOSITIONS and b.lower() in _PREPOSITIONS for a, b in itertools.pairwise(words))


_DANGLING = caseless(r"\s+for$")  # "book the retro for | Friday"; "log in | at 9" keeps its "in"


def split_when(text: str) -> tuple[str, str]:
    """(what, when): the earliest split where the rest of the sentence is a time phrase; ("text", "") if none."""
    words = text.split()
    for start in range(len(words)):
        if is_time_phrase(words[start:]):
            what = " ".join(words[:start]).rstrip(",")
            return _DANGLING.sub("", what), " ".join(words[start:])
    return text, ""


# Words that start a clause, never a thing's name: "cancel the reminder" names it, "clear my head before the
# reminder fires" does not.
NOT_A_NAME = r"(?!(?:before|after|when|if|until|because|so|and|but|since|while|for|from)\b)"
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


def is_answer(text: str) -> bool:
    words = text.split()
    return bool(re.fullmatch(r"(?:in the )?(?:am|pm|a\.m\.?|p\.m\.?|morning|afternoon|evening)", text, re.I)) or (
        is_time_phrase(words) or is_time_phrase(["at", *words])
    )


def yours(text: str) -> str:
    """The person's words said back to them: "call my mom" → "call your mom"."""
    swaps = {"my": "your", "me": "you", "i": "you", "myself": "yourself", "mine": "yours", "i'm": "you're"}
    return re.sub(r"\b(my|me|i|myself|mine|i'm)\b", lambda word: swaps[word[0].lower()], text, flags=re.I)
