"""The channel sender as an operator runs it alone (`manage.py worker --only channels`), over PostgreSQL, sending
through the official twilio library to a Twilio on 127.0.0.1: killed with SIGKILL while sends are in flight,
nothing is lost, and a text goes out twice only when its request had reached the provider and the worker died
before it could record the answer (docs/explanation/outbox.md)."""

import signal
from collections import Counter
from urllib.parse import parse_qs

import psycopg
import pytest

from tests.delivery_stack import Worker, wait_until
from tests.live_stack import private_database, require_postgres_and_redis, run_python
from tests.providers import TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_SMS_FROM, FakeTwilio
from tests.servers import serving

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack")]  # see tests/live_stack.py

SEND = ["manage.py", "worker", "--only", "channels", "--no-reload"]

SEED = """
import json
from django.contrib.auth import get_user_model
from django.db import transaction
from channels.models import LinkedAddress
from conversations import outbound
from conversations.models import Message, Role, Source
from conversations.services import conversation_of
for n in range(%(people)d):
    user = get_user_model().objects.create_user(f"p{n}", f"p{n}@example.com")
    LinkedAddress.objects.create(user=user, channel="sms", address=f"+1415555{n:04d}")
    with transaction.atomic():
        ids = [Message.objects.create(conversation=conversation_of(user), role=Role.ASSISTANT,
                                      source=Source.ASSISTANT, text=f"text {n}-{k}").pk for k in range(%(each)d)]
        outbound.written(ids)
print(json.dumps(%(people)d * %(each)d))
"""


def form_of(body: bytes) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(body.decode()).items()}


def whole_bodies(twilio: FakeTwilio) -> list[bytes]:
    """The bodies of the requests the fake received whole (as long as their Content-Length)."""
    with twilio.lock:
        return [body for _, headers, body in twilio.requests if len(body) == int(headers.get("content-length", -1))]


def outbox_of(database_url: str) -> list[tuple[str, str, str, int, int]]:
    """The outbox rows as the worker left them, read straight from the database (a shell process per poll would
    take seconds)."""
    with psycopg.connect(database_url) as connection:
        return connection.execute(
            "SELECT text, status, provider_message_id, takeovers, attempts FROM channels_outboundmessage ORDER BY id"
        ).fetchall()


def all_sent(database_url: str, timeout: float, what: str) -> list[tuple[str, str, str, int, int]]:
    """The outbox once every row is sent (bounded: fails after ``timeout``)."""
    return wait_until(
        lambda: (state := outbox_of(database_url)) and all(r[1] == "sent" for r in state) and state,
        timeout=timeout,
        what=what,
    )


def worker_env(database_url: str, twilio: FakeTwilio, **settings: str) -> dict[str, str]:
    """A `worker --only channels` process's settings: its database, the fake Twilio for SMS, and ``settings``."""
    return {
        "DATABASE_URL": database_url,
        "TWILIO_ACCOUNT_SID": TWILIO_ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": TWILIO_AUTH_TOKEN,
        "TWILIO_SMS_FROM": TWILIO_SMS_FROM,
        "TWILIO_API_BASE_URL": twilio.url,
        "PUBLIC_BASE_URL": "https://assistant.example",
        "LOG_LEVEL": "INFO",  # what the worker did, for a failure's message (``sending``)
        **settings,
    }


def sending(worker: Worker, twilio: FakeTwilio, count: int) -> None:
    """Wait (bounded) until ``count`` sends reached the stand-in; on failure, say what the worker logged."""
    try:
        wait_until(lambda: len(twilio.requests) >= count, timeout=60, what=f"{count} sends in flight")
    except AssertionError as late:
        raise AssertionError(f"{late}; the worker's log:\n{worker.output()[-3000:]}") from None


def test_kill_9_mid_send_loses_nothing_and_repeats_only_what_reached_the_provider():
    require_postgres_and_redis()
    with serving(FakeTwilio()) as twilio, private_database("outbox") as database_url:
        env = worker_env(database_url, twilio, CHANNEL_LEASE_SECONDS="2", CHANNEL_CONCURRENCY="16", LOG_LEVEL="INFO")
        total = run_python(SEED % {"people": 40, "each": 2}, env)
        twilio.delay = 0.6  # every send is in flight for a while
        doomed = Worker(env, "outbox-doomed", SEND)
        try:
            wait_until(lambda: len(twilio.requests) >= 24, timeout=60, what="the second round of sends in flight")
            doomed.signal(signal.SIGKILL)
            doomed.wait(10)
        finally:
            doomed.stop()
        # What reached the provider from the dead worker: every request it wrote whole, once the fake has answered
        # them all. A snapshot at the kill missed a request written just before it, still unread in its connection
        # (whose repeat then looked like that of a send that never reached the provider), and a request cut off
        # mid-body by the kill has no text (the fake refuses it, as Twilio would).
        wait_until(lambda: len(twilio.sent) == len(whole_bodies(twilio)), 30, "the killed worker's requests answered")
        reached_before_kill = {form_of(body)["Body"] for body in whole_bodies(twilio)}
        twilio.delay = 0.05
        survivor = Worker(env, "outbox-survivor", SEND)
        try:
            rows = all_sent(database_url, timeout=60, what="every text sent after the takeover")
        finally:
            survivor.stop()

    assert len(rows) == total
    sent = Counter(message.text for message in twilio.sent)
    assert set(sent) == {r[0] for r in rows}  # nothing lost
    twice = {body for body, count in sent.items() if count > 1}
    assert max(sent.values()) <= 2
    assert twice <= reached_before_kill  # a repeat only of a send that had reached the provider
    taken_over = {r[0] for r in rows if r[3] > 0}
    assert twice <= taken_over and taken_over, "the killed worker's sends were taken over after their lease"
    sids = {message.provider_message_id: message.text for message in twilio.sent}
    assert all(sids[r[2]] == r[0] for r in rows)  # each row keeps the id of a message that carried its text
    # Each person's texts left in order, even across the takeover: no first text after a second one.
    seconds_seen: set[str] = set()
    for message in twilio.sent:
        person, k = message.text.removeprefix("text ").split("-")
        if k == "1":
            seconds_seen.add(person)
        else:
            assert person not in seconds_seen


def test_sigterm_finishes_the_sends_in_flight_and_starts_no_other():
    """The worker claims a little ahead of its free send threads (so that a thread never waits for a claim): what it
    claimed but had not begun to send when SIGTERM came is put back, queued and uncounted, not sent in the grace
    period."""
    require_postgres_and_redis()
    with serving(FakeTwilio()) as twilio, private_database("outbox") as database_url:
        env = worker_env(database_url, twilio, CHANNEL_CONCURRENCY="2")
        total = run_python(SEED % {"people": 12, "each": 1}, env)
        twilio.delay = 1.5
        worker = Worker(env, "outbox-sigterm", SEND)
        try:
            sending(worker, twilio, 2)
            worker.signal(signal.SIGTERM)
            assert worker.wait(30) == 0
        finally:
            worker.stop()
        rows = outbox_of(database_url)

    assert len(twilio.requests) == 2  # only the two that had begun
    assert sorted(r[1] for r in rows) == ["queued"] * (total - 2) + ["sent"] * 2
    assert all(r[4] == 0 for r in rows if r[1] == "queued")  # put back uncounted
    assert {r[0] for r in rows if r[1] == "sent"} == {form_of(body)["Body"] for _, _, body in twilio.requests}


def test_the_leases_of_sends_finishing_in_the_grace_period_are_still_renewed():
    """A send may take most of CHANNEL_TIMEOUT_SECONDS; the grace period after SIGTERM outlasts it. Meanwhile another
    worker must not take the stopping worker's rows over (and send them again): their leases are renewed until
    they are recorded, as while the worker ran."""
    require_postgres_and_redis()
    with serving(FakeTwilio()) as twilio, private_database("outbox") as database_url:
        # A lease of 3 s renewed every second: a loaded machine (a slow commit, a starved process) may delay a renewal
        # by two seconds and not lose it. Without the renewals the other worker, up in a second or two, would take
        # both rows over about 3 s after the claim, well within the sends.
        env = worker_env(database_url, twilio, CHANNEL_CONCURRENCY="2", CHANNEL_LEASE_SECONDS="3")
        total = run_python(SEED % {"people": 2, "each": 1}, env)
        twilio.delay = 8.0  # over two and a half leases long
        stopping = Worker(env, "outbox-stopping", SEND)
        try:
            sending(stopping, twilio, 2)
            stopping.signal(signal.SIGTERM)
            other = Worker(env, "outbox-other", SEND)
            try:
                assert stopping.wait(30) == 0
                rows = all_sent(database_url, timeout=30, what="both texts recorded as sent")
            finally:
                other.stop()
        finally:
            stopping.stop()

    assert len(rows) == total
    assert len(twilio.requests) == 2, "the other worker took over a send still in flight and sent it again"
    assert all(r[3] == 0 for r in rows)  # no takeover
