"""The channel worker as the Procfile runs it (`manage.py sendchannels`), over PostgreSQL, sending through the
official twilio library to a Twilio on 127.0.0.1: killed with SIGKILL while sends are in flight, nothing is lost,
and a text goes out twice only when its request had reached the provider and the worker died before it could
record the answer (README, "When a text may arrive twice")."""

import signal
import time
from collections import Counter

import psycopg

from tests.delivery_stack import Worker, wait_until
from tests.live_stack import private_database, require_postgres_and_redis, run_python
from tests.outbox_twilio import ACCOUNT_SID, AUTH_TOKEN, fake_twilio

SEND = ["manage.py", "sendchannels"]

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


def outbox_of(database_url: str) -> list[tuple[str, str, str, int, int]]:
    """The outbox rows as the worker left them, read straight from the database (a shell process per poll would
    take seconds)."""
    with psycopg.connect(database_url) as connection:
        return connection.execute(
            "SELECT text, status, provider_message_id, takeovers, attempts FROM channels_outboundmessage ORDER BY id"
        ).fetchall()


def test_kill_9_mid_send_loses_nothing_and_repeats_only_what_reached_the_provider():
    require_postgres_and_redis()
    with fake_twilio() as twilio, private_database("outbox") as database_url:
        env = {
            "DATABASE_URL": database_url,
            "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
            "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
            "TWILIO_SMS_FROM": "+15005550006",
            "TWILIO_API_BASE_URL": twilio.url,
            "PUBLIC_BASE_URL": "https://assistant.example",
            "CHANNEL_LEASE_SECONDS": "2",
            "CHANNEL_CONCURRENCY": "16",
            "LOG_LEVEL": "INFO",
        }
        total = run_python(SEED % {"people": 40, "each": 2}, env)
        twilio.delay = 0.6  # every send is in flight for a while
        doomed = Worker(env, "outbox-doomed", SEND)
        try:
            twilio.wait_for(24, timeout=60)  # the second round is in flight
            doomed.signal(signal.SIGKILL)
            killed_at = time.monotonic()
            doomed.wait(10)
        finally:
            doomed.stop()
        reached_before_kill = {c.body for c in twilio.created if c.at <= killed_at}
        twilio.delay = 0.05
        survivor = Worker(env, "outbox-survivor", SEND)
        try:
            rows = wait_until(
                lambda: (state := outbox_of(database_url)) and all(r[1] == "sent" for r in state) and state,
                timeout=60,
                what="every text sent after the takeover",
            )
        finally:
            survivor.stop()

    assert len(rows) == total
    sent = Counter(c.body for c in twilio.created)
    assert set(sent) == {r[0] for r in rows}  # nothing lost
    twice = {body for body, count in sent.items() if count > 1}
    assert max(sent.values()) <= 2
    assert twice <= reached_before_kill  # a repeat only of a send that had reached the provider
    taken_over = {r[0] for r in rows if r[3] > 0}
    assert twice <= taken_over and taken_over, "the killed worker's sends were taken over after their lease"
    sids = {c.sid: c.body for c in twilio.created}
    assert all(sids[r[2]] == r[0] for r in rows)  # each row keeps the id of a message that carried its text
    # Each person's texts left in order, even across the takeover: no first text after a second one.
    seconds_seen: set[str] = set()
    for created in twilio.created:
        person, k = created.body.removeprefix("text ").split("-")
        if k == "1":
            seconds_seen.add(person)
        else:
            assert person not in seconds_seen
