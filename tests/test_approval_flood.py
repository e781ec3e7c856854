"""A leaked key against a running server (issue 38): the server under ``live_server``, a model that obeys every
``CALL:<tool>:<json>`` it reads (tests/obedient_model.py), Twilio's and Telegram's stand-ins on 127.0.0.1
(tests/providers.py), every request over HTTP. The key floods the person with requests; someone who can send as the
person's number guesses codes. What waits stays few, the phone gets few texts, no guess approves anything, and the
person still answers in the console (docs/explanation/approval.md#few-requests-few-texts,
docs/explanation/approval.md#codes-nobody-can-guess)."""

import json
import urllib.request

import pytest
from django.test import Client
from django.utils import timezone

from accounts.services import profile_of
from assistant.models import Action, ActionState
from channels.adapters.base import button_data
from channels.models import LinkedAddress
from channels.outbound.sender import Sender
from conversations.models import Message
from reminders.models import Reminder
from tests.factories import UserFactory, make_key
from tests.obedient_model import obedient_model
from tests.providers import configure
from tests.test_follow_ups import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NUMBER = "+14155550134"
CHAT = "532817164"
CALLS_PER_MESSAGE = 8


@pytest.fixture
def server(settings, live_server, providers):
    """The running server, its model and the providers' stand-ins pointed at each other."""
    configure(settings, providers, live_server.url)
    with obedient_model() as model:
        settings.ASSISTANT_BACKEND = "openai"
        settings.OPENAI_BASE_URL = model.url + "/v1"
        settings.ASSISTANT_TIMEOUT_SECONDS = 5
        settings.ASSISTANT_TOOL_ROUNDS = 2
        settings.ASSISTANT_THREAD_MESSAGES = 1  # it reads the message it answers: each asks for new calls
        yield live_server.url


@pytest.fixture
def person():
    owner = UserFactory(email="ada@example.com")
    profile = profile_of(owner)
    profile.channel = "sms"
    profile.save()
    LinkedAddress.objects.create(user=owner, channel="sms", address=NUMBER, last_inbound_at=timezone.now())
    return owner


def transfers(message: int, calls: int = CALLS_PER_MESSAGE) -> str:
    """A message that asks for ``calls`` different side-effecting calls."""
    return " ".join(
        "CALL:schedule_reminder:" + json.dumps({"text": f"pay mallory {message}-{n}", "when": "2099-01-05T15:00"})
        for n in range(calls)
    )


def post_message(server: str, plaintext: str, text: str) -> int:
    request = urllib.request.Request(
        f"{server}/api/v1/inbound/api-message",
        data=json.dumps({"message": text}).encode(),
        headers={"Authorization": f"Bearer {plaintext}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return int(answer.status)


def waiting(owner) -> list[Action]:
    return list(Action.objects.filter(state=ActionState.AWAITING_APPROVAL, delivery__conversation__user=owner))


def settled(count: int) -> bool:
    """Every message's delivery has finished (the model's last answer written)."""
    from conversations.models import Delivery, DeliveryStatus

    return Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count() >= count


def texts(providers) -> list[str]:
    Sender(concurrency=1).drain()
    return providers.twilio.texts_to(NUMBER)


def test_a_flood_from_one_key_leaves_few_requests_and_few_texts(server, providers, person):
    """60 messages (the key's whole minute), each asking for 8 calls that act: 10 wait, 3 of them are texted one by
    one, and one text says more wait. The rest are not asked; nothing runs."""
    _, plaintext = make_key(person, "ci", tools_need_approval=True)

    for message in range(60):
        assert post_message(server, plaintext, transfers(message)) == 200
    wait_for(lambda: settled(60), 120)

    assert len(waiting(person)) == 10  # APPROVAL_OPEN_PER_ASKER
    refused = Action.objects.filter(state=ActionState.DONE, is_error=True, result__startswith="Not done, and not asked")
    assert refused.count() >= 60 * CALLS_PER_MESSAGE - 10
    assert not Reminder.objects.exists()
    # Each message past the caps is answered in the thread (only there) that its requests wait.
    notes = Message.objects.filter(text__startswith="I asked you nothing new for this message: 10 requests from")
    assert notes.count() == 59
    sent = texts(providers)
    assert not any(text.startswith("I asked you nothing new") for text in sent)
    asked = [text for text in sent if text.startswith("Approve this?")]
    assert len(asked) == 3  # APPROVAL_TEXTS_PER_WINDOW
    [more] = [text for text in sent if "requests wait for your answer" in text]
    assert more.startswith("4 requests wait for your answer, the latest from the API key “ci”.")
    assert f"{server}/conversation/" in more


def test_a_flood_from_several_keys_stops_at_the_persons_cap(server, person):
    keys = [make_key(person, f"key {n}", tools_need_approval=True)[1] for n in range(3)]
    for round_number in range(2):
        for n, plaintext in enumerate(keys):
            assert post_message(server, plaintext, transfers(10 * n + round_number)) == 200
    wait_for(lambda: settled(6), 60)

    assert len(waiting(person)) == 25  # APPROVAL_OPEN_PER_PERSON
    by_key = {}
    for action in waiting(person):
        by_key[action.delivery.message.api_key_id] = by_key.get(action.delivery.message.api_key_id, 0) + 1
    assert max(by_key.values()) <= 10


def test_the_same_request_again_is_not_asked_twice(server, person):
    _, plaintext = make_key(person, "ci", tools_need_approval=True)
    for _ in range(3):
        assert post_message(server, plaintext, transfers(1, calls=2)) == 200
    wait_for(lambda: settled(3), 60)
    assert len(waiting(person)) == 2
    assert Action.objects.filter(approval_message__isnull=False).count() == 2


# --- Guessing --------------------------------------------------------------------------------------------------


def three_requests(server: str, owner) -> list[Action]:
    _, plaintext = make_key(owner, "ci", tools_need_approval=True)
    assert post_message(server, plaintext, transfers(7, calls=3)) == 200
    wait_for(lambda: settled(1), 60)
    requests = waiting(owner)
    assert len(requests) == 3
    return requests


def near_misses(requests: list[Action], how_many: int) -> list[str]:
    """The best guesses there are: a waiting request's own handle with another secret."""
    guesses = []
    for n in range(how_many):
        code = requests[n % len(requests)].approval_code
        guesses.append(code[:2] + ("ABCDEF" if code[2:] != "ABCDEF" else "GHJKMN"))
    return guesses


def test_guessed_codes_approve_nothing_and_lock_phone_answers_for_the_person(server, providers, person):
    """Five near misses from the person's number: each is told it names no request, nothing is approved, and then
    even the right code is refused from every address of the person (their Telegram chat too), which is told why.
    The console still answers."""
    LinkedAddress.objects.create(user=person, channel="telegram", address=CHAT)
    requests = three_requests(server, person)

    for guess in near_misses(requests, 5):
        status, _ = providers.twilio.inbound(NUMBER, f"YES {guess}").post(server)
        assert status == 200
        assert providers.twilio.texts_to(NUMBER)[-1].startswith(f"No request of yours is waiting for the code {guess}")
    assert len(waiting(person)) == 3

    [told] = [m.text for m in providers.telegram.sent if "wrong approval codes" in m.text]
    assert told.startswith(f"5 wrong approval codes came from your SMS {NUMBER} within the hour")

    right = requests[0].approval_code
    providers.telegram.inbound(int(CHAT), f"yes {right}").post(server)
    providers.twilio.inbound(NUMBER, f"YES {right}").post(server)
    assert len(waiting(person)) == 3 and not Reminder.objects.exists()
    assert providers.twilio.texts_to(NUMBER)[-1].startswith("Too many wrong codes")

    console = Client()
    console.force_login(person)
    page = console.post(f"/conversation/approvals/{requests[0].pk}/", {"decision": "approve"}, follow=True)
    assert "Approved" in page.content.decode()
    assert Action.objects.get(pk=requests[0].pk).state == ActionState.APPROVED
    wait_for(lambda: Reminder.objects.count() == 1, 30)


def test_wrong_codes_from_several_addresses_add_up(server, providers, person):
    """The count is the person's: three near misses by SMS and two from their Telegram chat lock both."""
    LinkedAddress.objects.create(user=person, channel="telegram", address=CHAT)
    requests = three_requests(server, person)
    guesses = near_misses(requests, 5)
    for guess in guesses[:3]:
        providers.twilio.inbound(NUMBER, f"YES {guess}").post(server)
    for guess in guesses[3:]:
        providers.telegram.inbound(int(CHAT), f"YES {guess}").post(server)

    providers.twilio.inbound(NUMBER, f"YES {requests[1].approval_code}").post(server)

    assert len(waiting(person)) == 3 and not Reminder.objects.exists()
    assert providers.twilio.texts_to(NUMBER)[-1].startswith("Too many wrong codes")


def test_a_button_carries_a_token_not_the_code_and_a_made_up_token_approves_nothing(server, providers, person):
    LinkedAddress.objects.filter(user=person).delete()
    LinkedAddress.objects.create(user=person, channel="telegram", address=CHAT, last_inbound_at=timezone.now())
    profile = profile_of(person)
    profile.channel = "telegram"
    profile.save()
    requests = three_requests(server, person)
    Sender(concurrency=1).drain()
    asked = [m for m in providers.telegram.sent if m.fields.get("reply_markup")]
    assert len(asked) == 3
    codes = {action.approval_code for action in requests}
    for message in asked:
        for button in providers.telegram.keyboard_of(message):
            assert not any(code in button["callback_data"] for code in codes)
            assert len(button["callback_data"].encode()) <= 64

    handle = requests[0].approval_code[:2]
    made_up = f"approve:{handle}." + "A" * 22
    providers.telegram.press(asked[0], made_up).post(server)
    assert providers.telegram.answered[-1]["text"].startswith("No request of yours is waiting for that button")
    assert len(waiting(person)) == 3

    named = next(m for m in asked if requests[0].approval_message.text.split("\n")[0] in m.text)
    providers.telegram.press(named, button_data(True, requests[0].approval_code)).post(server)
    assert Action.objects.get(pk=requests[0].pk).state == ActionState.APPROVED
