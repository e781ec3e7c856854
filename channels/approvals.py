"""Answering an approval request from the phone (docs/howto/approve-from-phone.md): a tap on the request's Approve or
Deny button (Telegram's inline keyboard, WhatsApp's reply buttons), or a reply with its code ("YES K7QZ4MX2", any
case) on any channel.

An answer counts only from an address linked to the person whose request it is, and only for the one request of
theirs its code names (assistant/approval/codes.py; a button's, also through the message it was on), so a code or a
press from anyone else's chat or number finds nothing, and a wrong code approves nothing and counts against the
person's few wrong tries. It is decided once (ingestion/approvals.py: the first answer
wins, from the phone or the console; the later ones are told it was already decided), before it expires. Such a reply
is never a message of the thread: nothing of it reaches the assistant.

Each answer is acknowledged at once, in one line: on Telegram by answering the button's callback query and
rewriting the request's message to say the outcome (its buttons gone); elsewhere by a short text after the commit.
A denial is not acknowledged by text on the phone: the assistant's "You denied it" message goes there already."""

import logging
import re
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.tasks import task
from django.urls import reverse

from accounts import audit
from assistant.approval import codes as approval_codes
from assistant.approval import requests
from assistant.models import Action, ActionState
from channels.adapters import adapter_for, telegram
from channels.adapters.base import Channel, Press, SendError, approval_buttons
from channels.models import LinkedAddress, OutboundMessage
from channels.notify import deliver_notice
from ingestion import approvals
from ops.limits import count_in_window

logger = logging.getLogger(__name__)

# "YES K7QZ4MX2", "no k7qz-4mx2.", " Yes  K7QZ 4MX2 ": a whole message that is only an answer and a code's shape.
REPLY = re.compile(rf"^\s*(?P<word>yes|no)\s+(?P<code>{approval_codes.TYPED})\s*[.!]?\s*$", re.IGNORECASE)

CHANNEL_NAMES = {
    Channel.SMS: "SMS",
    Channel.WHATSAPP: "WhatsApp",
    Channel.IMESSAGE: "iMessage",
    Channel.TELEGRAM: "Telegram",
}
# How the request's message on Telegram ends once answered: the mark, then where ("on Telegram", "in the console").
MARKS = {"approved": "✅ Approved", "denied": "✖️ Denied"}
# A request that ended with no answer (assistant/approval/requests.py request_ended): its last line on the phone.
ENDED = {
    "expired": "⌛ Nobody answered in time: nothing was done.",
    "withdrawn": "⊘ Withdrawn (what asked for it is gone): nothing was done.",
}


def as_answer(text: str) -> Press | None:
    """The Press a reply in words stands for ("YES K7QZ4MX2"), or None for any other message."""
    found = REPLY.match(text) if len(text) <= 40 else None
    if found is None:
        return None
    return Press(found.group("word").lower() == "yes", approval_codes.normalized(found.group("code")))


@dataclass
class Answered:
    """What became of a phone's answer: ``outcome`` for the log and the tests ("approved", "denied", "already",
    "too late", "unknown code"); ``said``: the one line the person is told."""

    outcome: str
    said: str
    request: Action | None = None


def answer(channel: str, address: str, user: User, press: Press) -> Answered:
    """Decide the person's request the press or reply names (call inside a transaction; what the person is told goes
    out after its commit)."""
    told: list[Answered] = []
    if press.query:
        # Telegram: the tap is answered, and the request's message says the outcome. Registered before the answer
        # is decided, so that after the commit the button's spinner stops before what the answer starts (the
        # approved call's hand-off to the assistant, which runs at once under the immediate task backend).
        transaction.on_commit(lambda: _answer_tap(press, told[0]) if told else None, robust=True)
    answered = _decide(channel, address, user, press)
    told.append(answered)
    if not press.query and answered.outcome != "denied":  # a denial is told by the assistant's own message
        transaction.on_commit(partial(deliver_notice.enqueue, channel, address, answered.said), robust=True)
    logger.info("approval answered on %s: %s", channel, answered.outcome)
    return answered


def _decide(channel: str, address: str, user: User, press: Press) -> Answered:
    if _locked_out(user):
        return Answered("refused", f"Too many wrong codes for your requests: answer in the console for now. {_see()}")
    request = _request_of(channel, user, press)
    if request is None:
        _count_wrong(user, channel, address)
        said = f"the code {press.code}" if not press.token else "that button"
        return Answered("unknown code", f"No request of yours is waiting for {said}. {_see()}")
    given = approvals.answer(
        user, request, approve=press.approve, by=audit.from_phone(CHANNEL_NAMES.get(channel, channel))
    )
    return Answered(_OUTCOMES.get(given, given.value), _said(given, request), request)


# Wrong codes are counted per person, whatever address they came from (an SMS sender can be spoofed on some
# networks, and a person may link several): past WRONG_CODES_ALLOWED in a window even the right code is refused from
# every phone until the window ends, and the person is told on their other channels. The console always answers.
# A code names one request and its secret is one of 30⁶: at most 125 guesses in any 24 hours (25 windows), each
# hitting with a chance of 1.4e-9, below 2e-7 in all (docs/explanation/approval.md#codes-nobody-can-guess).
WRONG_CODES_ALLOWED = 5
WRONG_CODES_WINDOW_SECONDS = 3600


def _wrong_codes_key(user: User) -> str:
    return f"approval-wrong-codes:{user.pk}"


def _locked_out(user: User) -> bool:
    return int(cache.get(_wrong_codes_key(user)) or 0) >= WRONG_CODES_ALLOWED


def _count_wrong(user: User, channel: str, address: str) -> None:
    if count_in_window(_wrong_codes_key(user), WRONG_CODES_WINDOW_SECONDS) == WRONG_CODES_ALLOWED:
        transaction.on_commit(partial(_tell_locked_out, user.pk, channel, address), robust=True)


def _tell_locked_out(user_id: int, channel: str, address: str) -> None:
    """The person hears of the lock-out on every other address they linked (the one that guessed was told already)."""
    said = (
        f"{WRONG_CODES_ALLOWED} wrong approval codes came from your {CHANNEL_NAMES.get(channel, channel)} "
        f"{address} within the hour, so answers from your phone are refused for up to an hour. If that was not you, "
        f"someone may be sending as you. {_see()}"
    )
    for link in LinkedAddress.objects.filter(user_id=user_id).exclude(channel=channel, address=address):
        deliver_notice.enqueue(link.channel, link.address, said)


_OUTCOMES = {
    approvals.Answer.APPROVED: "approved",
    approvals.Answer.DENIED: "denied",
    approvals.Answer.ALREADY: "already",
    approvals.Answer.TOO_LATE: "too late",
}


def _request_of(channel: str, user: User, press: Press) -> Action | None:
    """The one request of the person the answer names by its handle (assistant/approval/codes.py), if the answer holds
    its code (a reply) or its token (a button), and, for a button, if the message it was on is that request's (or a
    message the outbox no longer knows). A wrong secret names nothing: no other request is tried."""
    named = (
        Action.objects.filter(
            delivery__conversation__user=user,
            approval_code__startswith=approval_codes.handle_of(press.code),
            approval_message__isnull=False,
        )
        .order_by("-pk")
        .first()
    )
    if named is None:
        return None
    if press.token:
        right = approval_codes.token_matches(named.approval_code, press.token)
    else:
        right = approval_codes.matches(named.approval_code, press.code)
    if not right or _on_another_request(channel, user, press, named):
        return None
    return approvals.pending_of(user, named.pk)


def _on_another_request(channel: str, user: User, press: Press, named: Action) -> bool:
    if not press.message:
        return False
    context = (
        OutboundMessage.objects.filter(channel=channel, provider_message_id=press.message, person=user)
        .values_list("message__context", flat=True)
        .first()
    )
    shown = context.get(requests.APPROVAL_CONTEXT) if isinstance(context, dict) else None
    return isinstance(shown, int) and shown != named.pk


def _said(given: approvals.Answer, request: Action) -> str:
    what = requests.describe(request)
    if given is approvals.Answer.APPROVED:
        return f"Approved: {what}. I'm doing it now."
    if given is approvals.Answer.DENIED:
        return f"Denied: {what}. Nothing was done."
    if given is approvals.Answer.TOO_LATE:
        return f"Too late: that request had expired, so nothing was done ({what})."
    if given is approvals.Answer.WITHDRAWN:
        return f"Too late: what asked for it is gone (a key, a trigger or a connection), so nothing was done ({what})."
    state = Action.objects.filter(pk=request.pk).values_list("state", flat=True).first()
    earlier = _EARLIER.get(str(state), "answered")
    return f"Already decided: that request was {earlier} before (nothing more was done)."


_EARLIER: dict[str, str] = {
    ActionState.APPROVED: "approved",
    ActionState.DENIED: "denied",
    ActionState.EXPIRED: "left to expire",
}


def _see() -> str:
    return f"Your requests are in the console: {settings.PUBLIC_BASE_URL}{reverse('conversations:thread')}"


@task
def mark_answered(action_id: int, outcome: str, where: str = "") -> None:
    """A request answered somewhere else (``where``: "in the console"), or ended unanswered (``outcome`` "expired"
    or "withdrawn"): its message on Telegram, if it went there, says so, and its buttons go. Telegram lets a bot
    edit its own messages; other channels cannot be changed."""
    adapter = adapter_for(Channel.TELEGRAM)
    action = Action.objects.filter(pk=action_id).select_related("approval_message").first()
    question = action.approval_message if action is not None else None
    last_line = f"{MARKS[outcome]} {where}." if outcome in MARKS else ENDED.get(outcome)
    if not isinstance(adapter, telegram.TelegramAdapter) or question is None or last_line is None:
        return
    sent = OutboundMessage.objects.filter(message=question, channel=Channel.TELEGRAM).exclude(provider_message_id="")
    request = approval_buttons(question.text)
    for reference in sent.values_list("provider_message_id", flat=True):
        try:
            adapter.show_outcome(reference, f"{request[0] if request else question.text}\n\n{last_line}")
        except SendError as error:
            logger.warning("telegram approval request not edited: %s", error.reason)


def _answer_tap(press: Press, answered: Answered) -> None:
    """After the commit, in the webhook's own request (Telegram shows a spinner on the button until the query is
    answered): answer the query, then rewrite the request's message to say the outcome."""
    adapter = adapter_for(Channel.TELEGRAM)
    if not isinstance(adapter, telegram.TelegramAdapter):
        return
    try:
        adapter.answer_press(press.query, answered.said)
    except SendError as error:
        logger.warning("telegram callback query not answered: %s", error.reason)
    mark = MARKS.get(answered.outcome)
    question = answered.request.approval_message if answered.request is not None else None
    if mark is None or question is None or not press.message:
        return
    request = approval_buttons(question.text)
    try:
        adapter.show_outcome(press.message, f"{request[0] if request else question.text}\n\n{mark} on Telegram.")
    except SendError as error:
        logger.warning("telegram approval request not edited: %s", error.reason)


def unlinked_tap(press: Press) -> None:
    """A tap from a chat no person linked: its spinner stops, and it is told why nothing happened."""
    adapter = adapter_for(Channel.TELEGRAM)
    if isinstance(adapter, telegram.TelegramAdapter) and press.query:
        try:
            adapter.answer_press(press.query, "This Telegram account is not linked to an assistant.")
        except SendError as error:
            logger.warning("telegram callback query not answered: %s", error.reason)


def linked_person(channel: str, address: str) -> User | None:
    link = LinkedAddress.objects.filter(channel=channel, address=address).select_related("user").first()
    return link.user if link is not None and link.user.is_active else None


def mark_ended(sender: object, *, action_id: int, outcome: str, **_: object) -> None:
    """``request_ended``'s receiver (channels/apps.py): the request's Telegram message is rewritten by a task, so a
    slow Bot API never holds up the sweep or the revocation that ended it."""
    mark_answered.enqueue(action_id, outcome)
