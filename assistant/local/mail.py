"""The person's mailbox: "any new mail from Sarah" searches it, "email bob@example.com that I'm running late" composes
a mail that is sent only once the person approves it."""

import re
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from assistant.local.meaning import Act, Ask, Intent, Refuse
from assistant.local.phrases import caseless, is_time_word, yours

NO_MAILBOX = "No mailbox is connected: add one under Connections, then ask me again."

_MAILS = r"(?:e-?mails?|mails?|messages|inbox)"
_CHECK_MAIL = caseless(
    r"^(?:(?:check|show|read|list|open|get|see|view|display|fetch|give me|tell me)\s+(?:me\s+)?"
    rf"(?:(?:my|the|all|any|all my)\s+)*(?:(?:new|unread|latest|recent|last)\s+)*{_MAILS}"
    r"(?:\s+(?:for me|in my inbox|today|please))?"
    r"|(?:any|got any|do i have(?: any)?|have i got(?: any)?|is there(?: any)?|are there(?: any)?|anything)\s+"
    r"(?:new\s+|unread\s+|important\s+)?(?:e-?mails?|mail|messages|in my inbox)(?:\s+(?:for me|in my inbox|today))?"
    r"|(?:what'?s|what is|anything) new in my inbox|(?:what'?s|what is|is there anything|anything) in my inbox"
    r"|how many (?:new |unread )?(?:e-?mails?|mails|messages)(?: do i have| have i got| are there)?(?: in my inbox)?"
    r"|(?:my\s+)?(?:unread|new|latest|recent)\s+(?:e-?mails?|mail|messages)"
    r"|(?:my\s+)?inbox|(?:who|has anyone) (?:e-?mailed|written to|wrote to) me(?: today)?)$"
)


_MAIL_WORDS = r"(?:e-?mails?|mails?|messages|inbox|gmail|outlook)"
_NOT_WHEN = r"(?!(?:today|yesterday|recently|lately|since|last|this|for|in|about|on|at|please|now|so|to|me)\b)"
_SENDER = rf"{_NOT_WHEN}[\w.@'-]+(?: {_NOT_WHEN}[\w.'-]+)?"
_FROM = rf"(?:\s+(?:from|by)\s+{_SENDER})?"
# Questions about the inbox, then a few words of when: "any new mail from sarah", "who sent me email today", "did I
# get an email from Sandy", "did Paul email me recently", "what's the latest email from Amazon".
_ASK_MAIL = caseless(
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
    r"(?P<tail>(?:\s+\S+){0,6})$"
)
_MAIL_TAIL = {
    "today", "yesterday", "recently", "lately", "since", "last", "hour", "this", "morning", "week", "for", "me", "in",
    "my", "inbox", "please", "now", "right", "yet", "so", "far", "the", "at", "moment", "new", "unread", "email",
    "emails", "mail", "from", "hours", "days", "afternoon", "evening", "i", "checked", "to", "on", "any", "received",
    "got", "get", "gotten", "minutes", "night", "come", "after", "before", "noon", "time", "all",
}  # fmt: skip


def search(text: str, now: datetime, tools: Collection[str]) -> Intent:
    checked = _CHECK_MAIL.match(text) is not None
    asked = None if checked else _ASK_MAIL.match(text)
    if asked is None and not checked:
        return None
    tail = re.sub(r"\b(?:about|regarding) .+$", "", asked["tail"].lower()) if asked is not None else ""
    if not all(word in _MAIL_TAIL or is_time_word(word) for word in tail.split()):
        return None
    if "mail_search" not in tools:
        return Refuse(NO_MAILBOX, "mail_search")
    return Act("mail_search", _mail_filters(text, asked, now))


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
_RECIPIENT = rf"({_ADDRESS}|(?-i:[A-Z][\w'-]*)(?:\s+(?-i:[A-Z][\w'-]*))?)"
_SAYING = (
    r"(?:\s*[:,]\s*|\s+(?:that|saying|to say|and say|and tell (?:him|her|them)(?: that)?|"
    r"telling (?:him|her|them)(?: that)?)\s+|\s+(?=about\b))"
)
_MAIL_NOUN = r"(?:an?\s+|a quick\s+)?(?:e-?mail|mail|message|note|line)"
_SEND_MAIL = caseless(
    rf"^(?:(?:e-?mail|mail)\s+{_RECIPIENT}"
    rf"|(?:send|write|shoot|drop|compose)\s+(?:{_MAIL_NOUN}\s+to\s+{_RECIPIENT}|{_RECIPIENT}\s+{_MAIL_NOUN})"
    rf"|(?:write|reply)\s+to\s+{_RECIPIENT}"
    rf"|tell\s+{_RECIPIENT}\s+(?:by|via|in an|over)\s+e-?mail)"
    rf"(?:{_SAYING}(.*))?$"
)
# A mail to someone named without an address ("email my boss that I'll be late", "send an email to sandy"): asked
# for the address.
_NOT_SOMEONE = (
    r"(?!(?:is|was|are|the|a|an|it|this|that|me|server|address|sent|from|to|not|still|down|works?|template|client|"
    r"app|list|and|for|in|on|me|with|again|notifications?|settings?|account|box|inbox)\b)"
)
_SEND_MAIL_NAMED = caseless(
    r"^(?:e-?mail|(?:send|write|prepare|start|compose|draft|open) (?:an? |the |a new |a quick )?(?:e-?mail|mail) "
    rf"(?:to|for))\s+(my \w+|{_NOT_SOMEONE}[\w'-]+(?: (?-i:[A-Z])\w+)?)"
    r"(?:\s+(?:that|to|about|and|saying|asking|telling|how|with|if|:)\b.*|:.*)?$"
    r"|^tell ([\w'-]+) .+ (?:through|by|via|over|in an) e-?mail$"
    rf"|^send ({_NOT_SOMEONE}\w+) (?:an? |the following )?e-?mail\b.*$"
)
_SUBJECT_LIMIT = 60


def send(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _SEND_MAIL.match(text)
    if found is None:
        named = _SEND_MAIL_NAMED.match(text)
        if named is None:
            return None
        recipient = next(group for group in named.groups() if group)
    else:
        recipient = next(group for group in found.groups()[:-1] if group)
    if "mail_send" not in tools:
        return Refuse(NO_MAILBOX, "mail_send")
    if found is None or not re.fullmatch(_ADDRESS, recipient):
        return _address_needed(recipient)
    return _dictated(recipient, (found.groups()[-1] or "").strip())


def _dictated(recipient: str, said: str) -> Intent:
    """The mail to ``recipient`` that ``said`` dictates (the person confirms every mail), or what it should say."""
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
    return Act("mail_send", {"to": recipient, "subject": subject, "body": body})


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
