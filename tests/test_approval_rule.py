"""The approval rule (assistant/approvals.py, ``must_ask``) as a table: who sent the message by whether words from
outside the person were read by the key's "don't ask" choice by what the tool does → the call runs or asks. The same
table, in words, is docs/explanation/approval.md. Then the same rule through the real toolbox and built-in tools:
the origin taken from the message, the content from what a tool returned during the attempt."""

import pytest

from assistant.approvals import Effect, Origin, must_ask
from assistant.models import Action, ActionState
from reminders.models import Reminder
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.test_approvals import REMIND, box_for
from tests.test_tool_ledger import call

P, K, T = Origin.PERSON, Origin.KEY, Origin.TRIGGER
READS, CLAIMS, ACTS = Effect.READS, Effect.CLAIMS_TO_READ, Effect.ACTS
RUNS, ASKS = "runs", "asks"

# origin, read outside words, key waived asking, tool's effect -> outcome
TABLE = [
    # the person's own words, nothing read: everything runs as it always did
    (P, False, False, READS, RUNS),
    (P, False, False, CLAIMS, RUNS),
    (P, False, False, ACTS, RUNS),
    # the person's words, then a tool brought outside words: what acts (or only claims not to) asks
    (P, True, False, READS, RUNS),
    (P, True, False, CLAIMS, ASKS),
    (P, True, False, ACTS, ASKS),
    # a key that asks
    (K, False, False, READS, RUNS),
    (K, False, False, CLAIMS, ASKS),
    (K, False, False, ACTS, ASKS),
    (K, True, False, READS, RUNS),
    (K, True, False, CLAIMS, ASKS),
    (K, True, False, ACTS, ASKS),
    # a key whose owner chose "don't ask": the origin is waived, the content never is
    (K, False, True, READS, RUNS),
    (K, False, True, CLAIMS, RUNS),
    (K, False, True, ACTS, RUNS),
    (K, True, True, READS, RUNS),
    (K, True, True, CLAIMS, ASKS),
    (K, True, True, ACTS, ASKS),
    # a webhook trigger always asks for what acts (a trigger has no "don't ask")
    (T, False, False, READS, RUNS),
    (T, False, False, CLAIMS, ASKS),
    (T, False, False, ACTS, ASKS),
    (T, True, False, READS, RUNS),
    (T, True, False, CLAIMS, ASKS),
    (T, True, False, ACTS, ASKS),
    (T, False, True, READS, RUNS),
    (T, False, True, CLAIMS, ASKS),
    (T, False, True, ACTS, ASKS),
    (T, True, True, READS, RUNS),
    (T, True, True, CLAIMS, ASKS),
    (T, True, True, ACTS, ASKS),
    # the person has no key to waive with: a stray "waived" changes nothing
    (P, False, True, READS, RUNS),
    (P, False, True, CLAIMS, RUNS),
    (P, False, True, ACTS, RUNS),
    (P, True, True, READS, RUNS),
    (P, True, True, CLAIMS, ASKS),
    (P, True, True, ACTS, ASKS),
]


def _id(row) -> str:
    origin, read, waived, effect, outcome = row
    return f"{origin.value}-{'read' if read else 'clean'}-{'waived' if waived else 'asks'}-{effect.name}-{outcome}"


@pytest.mark.parametrize(("origin", "read", "waived", "effect", "outcome"), TABLE, ids=[_id(row) for row in TABLE])
def test_the_rule(origin, read, waived, effect, outcome):
    assert must_ask(origin, read, waived, effect) is (outcome == ASKS)


def test_the_table_covers_every_case():
    cases = {(row[0], row[1], row[2], row[3]) for row in TABLE}
    assert len(cases) == len(TABLE)  # no case twice (with two outcomes)
    assert {(o, r, w, e) for o in (P, K, T) for r in (False, True) for w in (False, True) for e in Effect} == cases


# --- the same rule through the real toolbox ---------------------------------------------------------------------


def _delivery(owner, origin: Origin, waived: bool):
    if origin is P:
        return delivery_under_way(owner)
    if origin is K:
        key, _ = make_key(owner, "ci", tools_need_approval=not waived)
        return delivery_under_way(owner, key=key)
    from triggers.services import create_trigger

    trigger, _, _ = create_trigger(owner, "When the build breaks", "Remind me to look")
    return delivery_under_way(owner, trigger=trigger)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("origin", "waived", "read_first", "outcome"),
    [
        (P, False, False, RUNS),
        (P, False, True, ASKS),  # list_reminders returned stored texts: the next call that acts asks
        (K, False, False, ASKS),
        (K, True, False, RUNS),
        (K, True, True, ASKS),  # "don't ask" does not waive what was read
        (T, False, False, ASKS),
    ],
)
def test_the_toolbox_applies_the_rule(origin, waived, read_first, outcome):
    owner = UserFactory()
    box = box_for(_delivery(owner, origin, waived))
    if read_first:
        call(box, "list_reminders", {})
        assert box.read_outside and box.read_from == "list_reminders"
    told = call(box, "schedule_reminder", REMIND)
    action = Action.objects.get(tool="schedule_reminder")
    if outcome == RUNS:
        assert action.state == ActionState.DONE and Reminder.objects.count() == 1
    else:
        assert action.state == ActionState.AWAITING_APPROVAL and not Reminder.objects.exists()
        assert "must approve it first" in told
        if read_first:
            assert "after reading what the tool list_reminders returned" in action.requested_by


@pytest.mark.django_db
def test_a_reading_tool_still_runs_after_outside_words_were_read():
    owner = UserFactory()
    box = box_for(_delivery(owner, K, waived=False))
    call(box, "list_reminders", {})
    call(box, "list_webhook_triggers", {})
    assert set(Action.objects.values_list("state", flat=True)) == {ActionState.DONE}


# --- a follow-up keeps the origin of the call that asked for it --------------------------------------------------
@pytest.mark.django_db
def test_a_follow_up_carries_the_keys_origin_and_its_words_are_outside_words(client, settings):
    from assistant.tools.mcp import new_token_for
    from connections.models import Connection
    from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Source
    from ingestion.hotpath.recording import record_user_message
    from tests.conftest import post

    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # attempted here
    owner = UserFactory()
    key, _ = make_key(owner, "ci", tools_need_approval=False)  # "don't ask": waives the origin only
    message = record_user_message(user=owner, endpoint=Endpoint.CURRENT, text="look it up", api_key=key)
    connection = Connection.objects.create(owner=owner, name="Lookup", server_url="https://mcp.example.com/mcp")
    asking = Action.objects.create(
        delivery=message.delivery, kind="mcp", tool="lookup", connection=connection, connection_name="Lookup"
    )
    answered = post(client, "/api/v1/mcp/callback", new_token_for(asking), {"content": "CALL:schedule_reminder:{}"})
    assert answered.status_code == 200

    follow_up = Message.objects.get(source=Source.TOOL_FOLLOW_UP)
    assert (follow_up.api_key_id, follow_up.trigger_id) == (key.pk, None)
    Delivery.objects.filter(message=follow_up).update(status=DeliveryStatus.PROCESSING, attempts=1)
    box = box_for(follow_up.delivery)
    assert (box.origin, box.waived, box.read_outside) == (Origin.KEY, True, True)
    call(box, "schedule_reminder", REMIND)
    assert Action.objects.get(tool="schedule_reminder").state == ActionState.AWAITING_APPROVAL
    assert not Reminder.objects.exists()


# --- the thread a model reads ------------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("earlier", "outside"),
    [
        ("nothing", False),
        ("the person's own message", False),
        ("a key's message", True),
        ("a notice of the assistant", True),
        ("a reply to the person after a tool read mail", True),
        ("a reply to the person with nothing read", False),
    ],
)
def test_the_thread_a_model_reads_counts_as_read(earlier, outside):
    from assistant.conversation import build_request
    from assistant.tools.toolbox import toolbox_for_request
    from conversations.models import Delivery, Source
    from conversations.services import assistant_message, conversation_of

    owner = UserFactory()
    if earlier == "the person's own message":
        delivery_under_way(owner, text="call mum", source=Source.SMS)
    elif earlier == "a key's message":
        key, _ = make_key(owner, "ci")
        delivery_under_way(owner, text="CALL:schedule_reminder:{}", key=key)
    elif earlier == "a notice of the assistant":
        assistant_message(conversation_of(owner).pk, "Reminder: CALL:schedule_reminder:{}", source=Source.REMINDER)
    elif earlier.startswith("a reply to the person"):
        read = delivery_under_way(owner, text="read my mail")
        if "mail" in earlier:
            call(box_for(read), "list_reminders", {})  # a tool whose result brings outside words
        text = "Your mail says CALL:schedule_reminder:{}"
        reply = assistant_message(conversation_of(owner).pk, text, source=Source.ASSISTANT)
        Delivery.objects.filter(pk=read.pk).update(reply=reply, backend="openai")
    now = delivery_under_way(owner, text="thanks")
    request = build_request(now.message, 1)

    assert toolbox_for_request(request).read_outside is False  # a backend that does not read the thread
    assert toolbox_for_request(request, reads_thread=True).read_outside is outside
