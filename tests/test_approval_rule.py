"""The one decision (assistant/approval/rule.py, ``decide``) as a table: who sent the message by whether words from
outside the person were read by the key's "ask me first" choice, by what the tool does and whether the person trusts
its server, then the key's tool policy and the person's approval → run, ask or refuse. The same table, in words, is
docs/explanation/approval.md. Then the same decision through the real toolbox and built-in tools: the origin taken
from the message, the content from what a tool returned during the attempt."""

import itertools

import pytest

from assistant.approval.rule import Circumstances, Effect, Origin, Verdict, decide
from assistant.models import Action, ActionState
from reminders.models import Reminder
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.test_approvals import REMIND, box_for
from tests.test_tool_ledger import call

P, K, T = Origin.PERSON, Origin.KEY, Origin.TRIGGER
RUNS, ASKS, REFUSED = Verdict.RUN, Verdict.ASK, Verdict.REFUSE
R, A = RUNS, ASKS

# The tool's columns: one of ours that reads; a server's claim to read, the server not trusted / trusted; a tool that
# acts (on a trusted server or not: trust is about read-only claims only); a mail.
COLUMNS = [
    (Effect.READS, False),
    (Effect.CLAIMS_TO_READ, False),
    (Effect.CLAIMS_TO_READ, True),
    (Effect.ACTS, False),
    (Effect.ACTS, True),
    (Effect.SENDS, False),
]
# origin, outside words read, the key asks first -> the verdict in each column, for a tool the key allows, unapproved
TABLE = {
    # the person's own words, nothing read: everything runs as it always did, but a mail is confirmed
    (P, False, True): (R, R, R, R, R, A),
    # the person's words, then a tool brought outside words: what acts, or only says it reads, asks
    (P, True, True): (R, A, R, A, A, A),
    # a key that asks first
    (K, False, True): (R, A, R, A, A, A),
    (K, True, True): (R, A, R, A, A, A),
    # a key whose owner chose "don't ask": the origin is waived, the content never is, a mail never
    (K, False, False): (R, R, R, R, R, A),
    (K, True, False): (R, A, R, A, A, A),
    # a webhook trigger always asks for what acts (a trigger has no "don't ask")
    (T, False, True): (R, A, R, A, A, A),
    (T, True, True): (R, A, R, A, A, A),
    (T, False, False): (R, A, R, A, A, A),
    (T, True, False): (R, A, R, A, A, A),
    # the person has no key to waive with: a stray "don't ask" changes nothing
    (P, False, False): (R, R, R, R, R, A),
    (P, True, False): (R, A, R, A, A, A),
}

EVERY_CASE = list(
    itertools.product((P, K, T), (False, True), (True, False), COLUMNS, (True, False), (False, True))
)  # origin, read, key asks, (effect, trusted), allowed by the key's policy, approved


def expected(origin, read, key_asks, column, allowed, approved) -> Verdict:
    if not allowed:
        return REFUSED  # a tool the key's owner withheld: never run, never asked, even "approved"
    if approved:
        return RUNS  # the person said yes to this very call
    return TABLE[(origin, read, key_asks)][COLUMNS.index(column)]


def _id(case) -> str:
    origin, read, key_asks, (effect, trusted), allowed, approved = case
    return "-".join(
        [
            origin.value,
            "read" if read else "clean",
            "asks" if key_asks else "waived",
            effect.name + ("-trusted" if trusted else ""),
            "allowed" if allowed else "withheld",
            "approved" if approved else "unanswered",
        ]
    )


@pytest.mark.parametrize("case", EVERY_CASE, ids=[_id(case) for case in EVERY_CASE])
def test_the_decision(case):
    origin, read, key_asks, (effect, trusted), allowed, approved = case
    circumstances = Circumstances(
        origin=origin,
        read_outside=read,
        effect=effect,
        key_asks=key_asks,
        allowed=allowed,
        trusted=trusted,
        approved=approved,
    )
    assert decide(circumstances) is expected(*case)


def test_the_table_covers_every_case():
    assert set(TABLE) == {(o, r, k) for o in (P, K, T) for r in (False, True) for k in (True, False)}
    assert {effect for effect, _ in COLUMNS} == set(Effect)
    assert len(EVERY_CASE) == 3 * 2 * 2 * len(COLUMNS) * 2 * 2 == len(set(EVERY_CASE))


def test_what_is_not_from_the_person_never_acts_unasked():
    """The guarantee the table is for, said once more over every case: a tool that changes something (or only says
    it does not, from a server the person does not trust) runs unasked only for the person's own words with nothing
    read, or a key whose owner chose "don't ask" with nothing read; a mail never; approved, it runs."""
    for origin, read, key_asks, (effect, trusted), allowed, approved in EVERY_CASE:
        verdict = decide(Circumstances(origin, read, effect, key_asks, allowed, trusted, approved))
        changes = effect in (Effect.ACTS, Effect.SENDS) or (effect is Effect.CLAIMS_TO_READ and not trusted)
        if verdict is RUNS and changes and not approved:
            assert effect is not Effect.SENDS and not read
            assert origin is P or (origin is K and not key_asks)


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
        assert box.read_outside and box.read_from == "what the tool list_reminders returned"
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


# --- refused: a tool the key's owner withheld ----------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("approved", [False, True], ids=["asked-by-the-model", "approved-call"])
def test_a_tool_the_key_withholds_is_refused_even_as_an_approved_call(approved):
    import time

    from keys.models import ApiKey, ToolAccess

    owner = UserFactory()
    key, _ = make_key(owner, "ci", tools_need_approval=False)
    ApiKey.objects.filter(pk=key.pk).update(tool_access=ToolAccess.LISTED, allowed_tools=["list_reminders"])
    box = box_for(delivery_under_way(owner, key=key))
    assert [tool["function"]["name"] for tool in box.as_openai()] == ["list_reminders"]  # never offered

    told = box.call("approved-1", "schedule_reminder", REMIND, 1, time.monotonic() + 10, approved=approved)

    assert told == (
        "Error: there is no tool named 'schedule_reminder' for this key's messages (its owner limited its tools)."
    )
    action = Action.objects.get(tool="schedule_reminder")
    assert action.state == ActionState.DONE and action.is_error and not Reminder.objects.exists()
