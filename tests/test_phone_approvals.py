"""Approving from the phone (channels/approvals.py, docs/howto/approve-from-phone.md): a key's message makes the
built-in assistant want a reminder; the request reaches the person's phone through the outbox and the provider's
stand-in on 127.0.0.1 (tests/providers.py); the person answers there: Telegram's inline buttons (a callback_query
with the webhook's secret token), WhatsApp's reply buttons (a signed ``interactive`` message), or "YES K7QZ4MX2" by SMS,
iMessage or WhatsApp through Twilio. Each answer goes through the real inbound views; the call runs once, and never
for a forged, replayed or foreign answer."""

import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import close_old_connections, connection
from django.utils import timezone

from accounts.models import AuditEvent, AuditKind
from accounts.services import profile_of
from assistant.models import Action, ActionState
from channels.adapters.base import approval_buttons, button_data
from channels.models import InboundEvent, LinkedAddress
from channels.outbound.sender import Sender
from conversations.models import Message, Role, Source
from ingestion import approvals
from reminders.models import Reminder
from tests.factories import UserFactory, make_key
from tests.providers import Outgoing

pytestmark = pytest.mark.django_db

NUMBER = "+14155551234"
OTHER_NUMBER = "+14155559876"
CHAT = "532817164"
OTHER_CHAT = "771234501"
ASK = "Remind me to renew the domain tomorrow at 3pm"


def linked(channel: str, address: str, email: str = "ada@example.com"):
    person = UserFactory(email=email)
    profile = profile_of(person)
    profile.channel = "sms"
    profile.save()
    LinkedAddress.objects.create(user=person, channel=channel, address=address, last_inbound_at=timezone.now())
    return person


def send_due() -> int:
    return Sender(concurrency=2).drain()


@pytest.fixture
def deliver(client, django_capture_on_commit_callbacks):
    """A provider's callback through the real view, and what its commit starts (acknowledgements, the hand-off of
    an approval to the assistant: the immediate task backend), as a real request runs it."""

    def deliver(callback):
        with django_capture_on_commit_callbacks(execute=True):
            return callback.send(client)

    return deliver


def ask(send, person) -> Action:
    """A script's message makes the assistant want a reminder: the call waits, the request is sent to the phone."""
    _, key = make_key(person, "nightly backup", tools_need_approval=True)
    assert send(key, {"message": ASK}).status_code == 200
    action = Action.objects.get(tool="schedule_reminder", delivery__conversation__user=person)
    assert action.state == ActionState.AWAITING_APPROVAL and len(action.approval_code) == 8
    assert send_due() >= 1
    return action


def the_request(sent: list[Outgoing], action: Action) -> Outgoing:
    [request] = [m for m in sent if "renew the domain" in m.text.lower() and "Approve this?" in m.text]
    return request


def wrong_codes(action: Action, how_many: int) -> list[str]:
    """Codes with the request's own handle and another secret: the nearest a guess can come."""
    handle = action.approval_code[:2]
    return [c for c in (handle + letter * 6 for letter in "ABCDEFGHJK") if c != action.approval_code][:how_many]


def reminders_of(person) -> int:
    return Reminder.objects.filter(owner=person).count()


# --- Telegram: inline buttons ------------------------------------------------------------------------------------


def test_telegram_request_has_buttons_and_a_tap_approves_it_once(providers, send, deliver):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    assert request.address == CHAT
    assert providers.telegram.keyboard_of(request) == [
        {"text": "✅ Approve", "callback_data": button_data(True, action.approval_code)},
        {"text": "✖️ Deny", "callback_data": button_data(False, action.approval_code)},
    ]
    assert "Reply YES" not in request.text  # the buttons say it
    assert request.text.startswith("Approve this? Remind you “Renew the domain” on ")
    assert "\nAsked by API key “nightly backup” (psk_" in request.text and "{" not in request.text
    assert f"http://testserver/conversation/approvals/{action.pk}/" in request.text

    response = deliver(providers.telegram.press(request, button_data(True, action.approval_code)))

    assert response.status_code == 200
    assert reminders_of(person) == 1  # carried out once, in the approval's own delivery
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    [answered] = providers.telegram.answered
    assert answered["text"].startswith("Approved: remind you “Renew the domain”")
    [edited] = providers.telegram.edited
    assert (str(edited["chat_id"]), edited["message_id"]) == (CHAT, int(request.provider_message_id.split(":")[1]))
    assert edited["text"].endswith("✅ Approved on Telegram.") and "reply_markup" not in edited
    assert "Remind you “Renew the domain”" in edited["text"]
    audit = AuditEvent.objects.get(kind=AuditKind.APPROVAL_GIVEN)
    assert audit.actor == "you, from Telegram"
    # The tap is not a message of the thread: the assistant never read "approve:1234".
    assert not Message.objects.filter(role=Role.USER, source=Source.TELEGRAM).exists()

    again = deliver(providers.telegram.press(request, button_data(True, action.approval_code)))
    assert again.status_code == 200
    assert providers.telegram.answered[-1]["text"].startswith("Already decided: that request was approved")
    assert reminders_of(person) == 1
    assert len(providers.telegram.edited) == 1


def test_telegram_deny_runs_nothing_and_says_so_on_the_message(providers, send, deliver):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)

    deliver(providers.telegram.press(request, button_data(False, action.approval_code)))

    assert Action.objects.get(pk=action.pk).state == ActionState.DENIED
    assert reminders_of(person) == 0
    assert providers.telegram.answered[-1]["text"].startswith("Denied: remind you")
    assert providers.telegram.edited[-1]["text"].endswith("✖️ Denied on Telegram.")


def test_a_forged_telegram_tap_without_the_secret_token_runs_nothing(providers, send, client):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    forged = providers.telegram.press(request, button_data(True, action.approval_code))
    forged.headers["X-Telegram-Bot-Api-Secret-Token"] = "guessed"

    assert forged.send(client).status_code == 403
    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0 and providers.telegram.answered == []


def test_a_replayed_telegram_update_is_a_duplicate_and_runs_nothing_more(providers, send, deliver):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    tap = providers.telegram.press(request, button_data(True, action.approval_code), update_id=991)
    deliver(tap)
    replay = deliver(tap)
    assert replay.status_code == 200 and replay.json()["duplicates"] == 1
    assert reminders_of(person) == 1
    assert len(providers.telegram.answered) == 1


def test_a_tap_from_another_persons_chat_finds_nothing_of_theirs(providers, send, deliver):
    owner = linked("telegram", CHAT)
    action = ask(send, owner)
    linked("telegram", OTHER_CHAT, email="mallory@example.com")
    # Mallory's own chat, a message of hers, the owner's code: the code is looked for among Mallory's requests.
    theirs = Outgoing(OTHER_CHAT, "hello", f"{OTHER_CHAT}:1", {"text": "hello"})
    providers.telegram.sent.append(theirs)

    deliver(providers.telegram.press(theirs, button_data(True, action.approval_code)))

    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(owner) == 0
    assert providers.telegram.answered[-1]["text"].startswith("No request of yours is waiting")


def test_a_tap_claimed_by_someone_else_in_the_chat_is_not_read(providers, send, deliver):
    owner = linked("telegram", CHAT)
    action = ask(send, owner)
    request = the_request(providers.telegram.sent, action)
    response = deliver(
        providers.telegram.press(request, button_data(True, action.approval_code), from_id=int(OTHER_CHAT))
    )
    assert response.status_code == 200
    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(owner) == 0


def test_a_tap_from_an_unlinked_chat_is_answered_and_runs_nothing(providers, send, deliver):
    owner = linked("telegram", CHAT)
    action = ask(send, owner)
    request = the_request(providers.telegram.sent, action)
    LinkedAddress.objects.filter(user=owner).delete()  # unlinked since the request went out

    deliver(providers.telegram.press(request, button_data(True, action.approval_code)))

    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert providers.telegram.answered[-1]["text"] == "This Telegram account is not linked to an assistant."


# --- WhatsApp through the Cloud API: reply buttons ----------------------------------------------------------------


def test_whatsapp_request_has_reply_buttons_and_a_tap_approves_it_once(providers, send, deliver):
    person = linked("whatsapp", NUMBER)
    action = ask(send, person)
    request = the_request(providers.whatsapp.sent, action)
    interactive = request.fields["interactive"]
    assert request.fields["type"] == "interactive" and interactive["type"] == "button"
    assert [b["reply"] for b in interactive["action"]["buttons"]] == [
        {"id": button_data(True, action.approval_code), "title": "Approve"},
        {"id": button_data(False, action.approval_code), "title": "Deny"},
    ]
    assert "Reply YES" not in request.text and "Remind you “Renew the domain”" in request.text

    tap = providers.whatsapp.button_reply(
        NUMBER, button_data(True, action.approval_code), "Approve", to=request.provider_message_id
    )
    assert deliver(tap).status_code == 200

    assert reminders_of(person) == 1
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    assert AuditEvent.objects.get(kind=AuditKind.APPROVAL_GIVEN).actor == "you, from WhatsApp"
    assert any(m.text.startswith("Approved: remind you") for m in providers.whatsapp.sent)
    assert not Message.objects.filter(role=Role.USER, source=Source.WHATSAPP).exists()

    assert deliver(tap).json()["duplicates"] == 1  # Meta's retry of the same message
    second = providers.whatsapp.button_reply(
        NUMBER, button_data(True, action.approval_code), "Approve", to=request.provider_message_id
    )
    deliver(second)  # a second tap
    assert providers.whatsapp.sent[-1].text.startswith("Already decided")
    assert reminders_of(person) == 1


def test_a_forged_whatsapp_tap_without_metas_signature_runs_nothing(providers, send, client):
    person = linked("whatsapp", NUMBER)
    action = ask(send, person)
    request = the_request(providers.whatsapp.sent, action)
    tap = providers.whatsapp.button_reply(
        NUMBER, button_data(True, action.approval_code), "Approve", to=request.provider_message_id
    )
    tap.headers["X-Hub-Signature-256"] = "sha256=" + "0" * 64  # a guess, not the HMAC with Meta's app secret

    assert tap.send(client).status_code == 403
    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0


def test_a_whatsapp_tap_answers_only_the_request_of_the_message_it_was_on(providers, send, deliver):
    person = linked("whatsapp", NUMBER)
    first = ask(send, person)
    _, key = make_key(person, "plants", tools_need_approval=True)
    send(key, {"message": "Remind me to water the plants tomorrow at 9am"})
    second = Action.objects.exclude(pk=first.pk).get(tool="schedule_reminder")
    send_due()
    on_second = next(m for m in providers.whatsapp.sent if "water the plants" in m.text.lower())

    # The first request's code on the second request's message: no request of this person has both.
    deliver(
        providers.whatsapp.button_reply(
            NUMBER, button_data(True, first.approval_code), "Approve", to=on_second.provider_message_id
        )
    )
    assert set(Action.objects.filter(tool="schedule_reminder").values_list("state", flat=True)) == {
        ActionState.AWAITING_APPROVAL
    }
    assert providers.whatsapp.sent[-1].text.startswith("No request of yours is waiting")

    # A message the outbox does not know (too old, or not ours): the code alone decides, among this person's.
    deliver(
        providers.whatsapp.button_reply(NUMBER, button_data(False, second.approval_code), "Deny", to="wamid.UNKNOWN")
    )
    assert Action.objects.get(pk=second.pk).state == ActionState.DENIED
    assert Action.objects.get(pk=first.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0


# --- SMS, iMessage, WhatsApp through Twilio: "YES K7QZ4MX2" ------------------------------------------------------


def test_sms_request_reads_as_sentences_and_yes_with_its_code_approves_it_once(providers, send, deliver):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    request = the_request(providers.twilio.sent, action)
    code = action.approval_code
    assert request.text.endswith(f"Reply YES {code} to approve or NO {code} to deny.")
    assert "{" not in request.text and "schedule_reminder" not in request.text
    assert "Nothing happens unless you approve it by " in request.text

    response = deliver(providers.twilio.inbound(NUMBER, f"yes {code}"))

    assert response.status_code == 200
    assert reminders_of(person) == 1
    assert AuditEvent.objects.get(kind=AuditKind.APPROVAL_GIVEN).actor == "you, from SMS"
    assert not Message.objects.filter(role=Role.USER, source=Source.SMS).exists()  # not a message to the assistant
    assert any(m.text.startswith("Approved: remind you") for m in providers.twilio.sent)

    deliver(providers.twilio.inbound(NUMBER, f"YES {code}"))  # again
    assert providers.twilio.sent[-1].text.startswith("Already decided: that request was approved")
    assert reminders_of(person) == 1


def test_no_with_its_code_denies_it(providers, send, deliver):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    before = len(providers.twilio.sent)
    deliver(providers.twilio.inbound(NUMBER, f"No {action.approval_code}."))
    assert Action.objects.get(pk=action.pk).state == ActionState.DENIED
    assert reminders_of(person) == 0
    assert len(providers.twilio.sent) == before  # no second text: the assistant's own message says it
    send_due()
    [told] = providers.twilio.sent[before:]
    assert told.text.startswith("You denied it, so I did not do it: remind you “Renew the domain”")


def test_a_code_from_an_unlinked_number_runs_nothing(providers, send, deliver):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    before = len(providers.twilio.sent)

    deliver(providers.twilio.inbound(OTHER_NUMBER, f"YES {action.approval_code}"))

    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0
    [hint] = providers.twilio.sent[before:]
    assert hint.address == OTHER_NUMBER and "is not linked to an assistant" in hint.text


def test_a_wrong_code_gets_a_one_line_hint_and_runs_nothing(providers, send, deliver):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    wrong = wrong_codes(action, 1)[0]  # its handle, another secret

    deliver(providers.twilio.inbound(NUMBER, f"yes {wrong}"))

    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    hint = providers.twilio.sent[-1].text
    assert hint.startswith(f"No request of yours is waiting for the code {wrong}.") and "\n" not in hint
    assert "http://testserver/conversation/" in hint


def test_after_five_wrong_codes_even_the_right_one_is_refused_from_that_number(providers, send, deliver):
    from channels.approvals import WRONG_CODES_ALLOWED

    person = linked("sms", NUMBER)
    action = ask(send, person)
    wrong = wrong_codes(action, WRONG_CODES_ALLOWED)
    for code in wrong:  # a sender guessing codes
        deliver(providers.twilio.inbound(NUMBER, f"YES {code}"))

    deliver(providers.twilio.inbound(NUMBER, f"YES {action.approval_code}"))

    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0
    assert providers.twilio.sent[-1].text.startswith("Too many wrong codes")


def test_a_stale_code_is_too_late_and_runs_nothing(providers, send, deliver, settings):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    with time_machine.travel(timezone.now() + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS + 5)):
        deliver(providers.twilio.inbound(NUMBER, f"YES {action.approval_code}"))
    assert Action.objects.get(pk=action.pk).state == ActionState.EXPIRED
    assert reminders_of(person) == 0
    assert any(m.text.startswith("Too late: that request had expired") for m in providers.twilio.sent)


def test_a_code_for_a_request_whose_key_was_revoked_runs_nothing(providers, send, deliver):
    from keys.models import ApiKey
    from keys.services import revoke_key

    person = linked("sms", NUMBER)
    action = ask(send, person)
    revoke_key(ApiKey.objects.get(owner=person, name="nightly backup"))

    deliver(providers.twilio.inbound(NUMBER, f"YES {action.approval_code}"))

    assert Action.objects.get(pk=action.pk).state == ActionState.EXPIRED
    assert reminders_of(person) == 0
    assert providers.twilio.sent[-1].text.startswith("Too late: what asked for it is gone")


@pytest.mark.parametrize("through", ["imessage", "twilio-whatsapp"])
def test_imessage_and_twilio_whatsapp_answer_with_the_code(providers, send, deliver, settings, through):
    from tests.providers import configure

    if through == "twilio-whatsapp":
        configure(settings, providers, "http://testserver", whatsapp_through="twilio")
    channel = "imessage" if through == "imessage" else "whatsapp"
    person = linked(channel, NUMBER)
    action = ask(send, person)
    sent = providers.bluebubbles.sent if through == "imessage" else providers.twilio.sent
    request = the_request(sent, action)
    assert request.text.endswith(f"Reply YES {action.approval_code} to approve or NO {action.approval_code} to deny.")

    if through == "imessage":
        deliver(providers.bluebubbles.inbound(NUMBER, f"Yes {action.approval_code}"))
    else:
        deliver(providers.twilio.inbound(NUMBER, f"YES {action.approval_code}", whatsapp=True))

    assert reminders_of(person) == 1
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED


def test_ordinary_words_still_reach_the_assistant(providers, send, deliver):
    person = linked("sms", NUMBER)
    deliver(providers.twilio.inbound(NUMBER, "yes 12345 is my locker"))
    assert Message.objects.filter(role=Role.USER, source=Source.SMS, conversation__user=person).count() == 1


# --- The first answer wins ---------------------------------------------------------------------------------------


def test_the_console_after_the_phone_is_told_it_was_decided(providers, send, deliver, client):
    person = linked("sms", NUMBER)
    action = ask(send, person)
    deliver(providers.twilio.inbound(NUMBER, f"YES {action.approval_code}"))
    client.force_login(person)
    late = client.post(f"/conversation/approvals/{action.pk}/", {"decision": "deny"}, follow=True)
    assert "answered already" in late.content.decode()
    assert Action.objects.get(pk=action.pk).state == ActionState.APPROVED
    assert reminders_of(person) == 1


def test_the_phone_after_the_console_is_told_it_was_decided(providers, send, deliver, client):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    client.force_login(person)
    client.post(f"/conversation/approvals/{action.pk}/", {"decision": "deny"})
    # The request's message on Telegram says it was answered, its buttons gone.
    [edited] = providers.telegram.edited
    assert edited["text"].endswith("✖️ Denied in the console.") and "reply_markup" not in edited
    assert f"{edited['chat_id']}:{edited['message_id']}" == request.provider_message_id
    deliver(providers.telegram.press(request, button_data(True, action.approval_code)))
    assert providers.telegram.answered[-1]["text"].startswith("Already decided: that request was denied")
    assert Action.objects.get(pk=action.pk).state == ActionState.DENIED
    assert reminders_of(person) == 0


def test_a_request_nobody_answered_loses_its_buttons_on_telegram(
    providers, send, settings, django_capture_on_commit_callbacks
):
    from assistant.approval import requests

    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    later = timezone.now() + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS + 5)
    with django_capture_on_commit_callbacks(execute=True):
        assert requests.expire_overdue(later) == 1

    [edited] = providers.telegram.edited
    assert f"{edited['chat_id']}:{edited['message_id']}" == request.provider_message_id
    assert edited["text"].endswith("⌛ Nobody answered in time: nothing was done.") and "reply_markup" not in edited
    assert "renew the domain" in edited["text"].lower()


def test_a_request_whose_key_was_revoked_loses_its_buttons_on_telegram(
    providers, send, deliver, django_capture_on_commit_callbacks
):
    from keys.models import ApiKey
    from keys.services import revoke_key

    person = linked("telegram", CHAT)
    action = ask(send, person)
    request = the_request(providers.telegram.sent, action)
    with django_capture_on_commit_callbacks(execute=True):
        revoke_key(ApiKey.objects.get(owner=person, name="nightly backup"))

    [edited] = providers.telegram.edited
    assert edited["text"].endswith("⊘ Withdrawn (what asked for it is gone): nothing was done.")
    assert "reply_markup" not in edited
    # A tap on a button the app still showed is told why nothing happened.
    deliver(providers.telegram.press(request, button_data(True, action.approval_code)))
    assert providers.telegram.answered[-1]["text"].startswith("Too late: what asked for it is gone")
    assert reminders_of(person) == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="two answers at once need two database connections")
@pytest.mark.django_db(transaction=True)
def test_two_answers_racing_decide_it_once(providers, settings):
    """The phone and the console answer at the same moment, on two connections: one wins, the other is ALREADY."""
    person = linked("sms", NUMBER)
    from tests.factories import delivery_under_way
    from tests.test_approvals import REMIND, box_for
    from tests.test_tool_ledger import call

    key, _ = make_key(person, "ci", tools_need_approval=True)
    call(box_for(delivery_under_way(person, key=key)), "schedule_reminder", REMIND)
    action = Action.objects.get()
    results: list[approvals.Answer] = []
    start = threading.Barrier(2)

    def answer(approve: bool) -> None:
        try:
            start.wait()
            pending = approvals.pending_of(person, action.pk)
            assert pending is not None
            results.append(approvals.answer(person, pending, approve=approve))
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=answer, args=(flag,)) for flag in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r.value for r in results) in (["already answered", "approved"], ["already answered", "denied"])
    assert Message.objects.filter(source=Source.APPROVAL).count() <= 1


def test_the_request_line_becomes_buttons_only_at_its_end():
    text = (
        "Approve this? Remind you “x”.\nAsked by API key “ci”.\nReply YES K7QZ4MX2 to approve or NO K7QZ4MX2 to deny."
    )
    assert approval_buttons(text) == ("Approve this? Remind you “x”.\nAsked by API key “ci”.", "K7QZ4MX2")
    assert approval_buttons(text + " (2/2)") == (
        "Approve this? Remind you “x”.\nAsked by API key “ci”. (2/2)",
        "K7QZ4MX2",
    )
    assert approval_buttons("Reply YES K7QZ4MX2 to approve or NO K7QZ4MX2 to deny.") is None  # nothing but the line
    assert approval_buttons(text.replace("NO K7QZ4MX2", "NO K7QZ4MX3")) is None
    assert approval_buttons(text + "\nP.S.") is None
    assert InboundEvent.objects.count() == 0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("YES K7QZ4MX2", "K7QZ4MX2"),
        ("no k7qz-4mx2.", "K7QZ4MX2"),
        (" Yes  K7QZ 4MX2 ", "K7QZ4MX2"),
        ("yes tomorrow", None),  # words are never an answer: a code's second character is a digit
        ("no problem", None),
        ("YES 4821", None),
        ("yes K7QZ4MX2 and more", None),
    ],
)
def test_what_reads_as_an_answer(text, code):
    from channels.approvals import as_answer

    press = as_answer(text)
    assert (press.code if press else None) == code
