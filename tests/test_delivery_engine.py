"""The delivery engine end to end (issue 15): messages accepted by gunicorn, handed over by real worker processes
(`manage.py db_worker`, as the Procfile runs it) to an assistant runtime on 127.0.0.1; PostgreSQL throughout.

Order per thread under concurrency, two workers racing on one queue, SIGTERM mid-attempt (finished within the grace
period, or put back uncounted), kill -9 mid-attempt and recovery with no command, a runtime that hangs until the
timeout while other threads proceed, retries with backoff keeping the thread's order, and the receipts throughout.

Skips, saying why, where PostgreSQL or Redis cannot be reached (CI always has both)."""

import json
import signal
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tests.delivery_stack import Stack, Worker, delivery_stack, runtime_server, wait_until
from tests.live_stack import send

CURRENT = "/api/v1/inbound/api-message"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("live_stack"),  # see tests/live_stack.py
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="module")
def stack():
    with delivery_stack(users=60) as made:
        yield made


def accept(stack: Stack, key: str, text: str) -> str:
    answer = send(stack.gunicorn.url, CURRENT, key, {"message": text})
    assert answer.status == 200, answer.body
    return str(answer.body["id"])


def receipt(stack: Stack, key: str, message_id: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{stack.gunicorn.url}/api/v1/inbound/messages/{message_id}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def deliveries(stack: Stack, message_ids: list[str]) -> dict[str, tuple[str, int]]:
    with psycopg.connect(stack.env["DATABASE_URL"]) as db:
        rows = db.execute(
            "SELECT m.public_id, d.status, d.attempts FROM conversations_delivery d "
            "JOIN conversations_message m ON m.id = d.message_id WHERE m.public_id = ANY(%s)",
            [message_ids],
        ).fetchall()
    return {public_id: (status, attempts) for public_id, status, attempts in rows}


def retire(stack: Stack, message_ids: list[str]) -> None:
    """Take these deliveries out of the queue (failed): a retry left queued would be claimed by a later test's
    worker, in whatever order the tests run, and seen by its runtime as a message it never sent."""
    with psycopg.connect(stack.env["DATABASE_URL"]) as db:
        db.execute(
            "UPDATE conversations_delivery d SET status = 'failed', next_attempt_at = NULL, lease_expires_at = NULL "
            "FROM conversations_message m WHERE m.id = d.message_id AND m.public_id = ANY(%s)",
            [message_ids],
        )


def all_delivered(stack: Stack, message_ids: list[str]) -> bool:
    found = deliveries(stack, message_ids)
    return len(found) == len(message_ids) and all(status == "delivered" for status, _ in found.values())


def accept_threads(stack: Stack, keys: list[str], per_key: int, text: str = "m") -> dict[str, list[str]]:
    """Each key's messages sent one after another (its thread's order), the keys in parallel."""

    def one_thread(key: str) -> list[str]:
        return [accept(stack, key, f"{text}{n}") for n in range(per_key)]

    with ThreadPoolExecutor(len(keys)) as pool:
        return dict(zip(keys, pool.map(one_thread, keys), strict=True))


def test_each_thread_in_order_one_at_a_time_threads_in_parallel(stack):
    keys = stack.take_keys(8)
    with runtime_server(delay=0.05) as runtime:
        worker = Worker(stack.worker_env(runtime, DELIVERY_CONCURRENCY="16"), "order")
        try:
            sent = accept_threads(stack, keys, per_key=6)
            every = [m for ids in sent.values() for m in ids]
            wait_until(lambda: all_delivered(stack, every), 60, "every message delivered")
        finally:
            worker.stop()

    for ids in sent.values():
        assert [r.message_id for r in runtime.received if r.message_id in ids] == ids  # acceptance order
    assert runtime.overlaps == []  # never two messages of one thread with the runtime at once
    assert runtime.most_at_once > 1  # but threads in parallel
    assert sorted(attempts for _, attempts in deliveries(stack, every).values()) == [1] * len(every)
    assert worker.output().count("delivered on attempt") == len(every)  # one INFO line per delivery


def test_two_workers_share_the_queue_without_running_an_attempt_twice(stack):
    keys = stack.take_keys(20)
    with runtime_server(delay=0.1) as runtime:
        env = stack.worker_env(runtime, DELIVERY_CONCURRENCY="8", DELIVERY_CLAIM_BATCH="4")
        workers = [Worker(env, "race-a"), Worker(env, "race-b")]
        try:
            for worker in workers:  # both claiming before the first message arrives
                wait_until(lambda w=worker: "delivery engine started" in w.output(), 60, "the worker started")
            sent = accept_threads(stack, keys, per_key=5)
            every = [m for ids in sent.values() for m in ids]
            wait_until(lambda: all_delivered(stack, every), 60, "every message delivered")
        finally:
            for worker in workers:
                worker.stop()

    ids = [r.message_id for r in runtime.received]
    assert sorted(ids) == sorted(every)  # each exactly once
    for thread in sent.values():
        assert [m for m in ids if m in thread] == thread
    assert runtime.overlaps == []
    assert all(w.output().count("delivered on attempt") > 0 for w in workers)  # both took part


def test_sigterm_lets_the_attempt_in_flight_finish(stack):
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        worker = Worker(stack.worker_env(runtime, DELIVERY_GRACE_SECONDS="15"), "term-finish")
        try:
            message_id = accept(stack, key, "slow:2")
            wait_until(lambda: runtime.seen(message_id), 20, "the attempt started")
            assert receipt(stack, key, message_id)["status"] == "processing"
            worker.signal(signal.SIGTERM)
            assert worker.wait(timeout=25) == 0
        finally:
            worker.stop()

    assert deliveries(stack, [message_id]) == {message_id: ("delivered", 1)}
    assert receipt(stack, key, message_id)["message"] == "Delivered to the assistant, which replied."
    assert "nothing in flight" in worker.output()


# The worker with its main thread held up (a loaded machine) after the engine has started and before the task loop
# has (the last of its kinds to start).
SLOW_START = """
import os, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import call_command
from delivery import work
start = work.TaskLoop.start
work.TaskLoop.start = lambda self: (time.sleep(4), start(self))
call_command("worker", "--no-reload", "--no-startup-delay", "--interval", "0.2")
"""


def test_sigterm_while_the_worker_starts_still_lets_the_attempt_in_flight_finish(stack):
    """The engine claims as soon as it starts, before the task loop has: a SIGTERM then (a deploy right after a
    start) once ended the process by the default action, mid-attempt, with no grace period."""
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        message_id = accept(stack, key, "slow:2")
        worker = Worker(stack.worker_env(runtime, DELIVERY_GRACE_SECONDS="15"), "term-starting", ["-c", SLOW_START])
        try:
            wait_until(lambda: runtime.seen(message_id), 20, "the attempt started")
            worker.signal(signal.SIGTERM)
            assert worker.wait(timeout=25) == 0, worker.output()
        finally:
            worker.stop()

    assert deliveries(stack, [message_id]) == {message_id: ("delivered", 1)}
    assert "nothing in flight" in worker.output()


def test_sigterm_puts_back_what_cannot_finish_in_the_grace_period_without_counting_it(stack):
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        env = stack.worker_env(runtime, DELIVERY_GRACE_SECONDS="1", ASSISTANT_TIMEOUT_SECONDS="30")
        worker = Worker(env, "term-putback")
        try:
            message_id = accept(stack, key, "slow:6")
            wait_until(lambda: runtime.seen(message_id), 20, "the attempt started")
            worker.signal(signal.SIGTERM)
            assert worker.wait(timeout=15) == 0
            assert deliveries(stack, [message_id]) == {message_id: ("queued", 0)}  # back, uncounted
            assert receipt(stack, key, message_id)["message"] == "Queued for the assistant."
            assert "1 unfinished attempt(s) put back" in worker.output()

            successor = Worker(env, "term-successor")
            try:
                wait_until(lambda: all_delivered(stack, [message_id]), 30, "delivered by the next worker")
            finally:
                successor.stop()
        finally:
            worker.stop()

    assert deliveries(stack, [message_id]) == {message_id: ("delivered", 1)}
    assert [r.attempt for r in runtime.seen(message_id)] == [1, 1]  # same webhook-id, the first never answered


def test_kill_9_mid_attempt_recovers_by_itself_when_the_lease_expires(stack):
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        env = stack.worker_env(runtime, ASSISTANT_TIMEOUT_SECONDS="4", DELIVERY_LEASE_SECONDS="3")
        doomed = Worker(env, "kill-doomed")
        try:
            message_id = accept(stack, key, "slow:2")
            behind = accept(stack, key, "behind")  # the thread's next message waits behind the first
            wait_until(lambda: runtime.seen(message_id), 20, "the first attempt started")
            doomed.signal(signal.SIGKILL)
            doomed.wait(timeout=10)
        finally:
            doomed.stop()
        # Nobody is attempting it, but its lease has not expired: the receipt says it is being handed over.
        assert deliveries(stack, [message_id]) == {message_id: ("processing", 1)}
        assert receipt(stack, key, message_id)["status"] == "processing"
        survivor = Worker(env, "kill-survivor")  # another worker, already running or started later: no command
        try:
            wait_until(lambda: all_delivered(stack, [message_id, behind]), 40, "recovered with no command")
        finally:
            survivor.stop()

    assert deliveries(stack, [message_id, behind]) == {message_id: ("delivered", 2), behind: ("delivered", 1)}
    # Handed over twice only because the crash hid the outcome: the same webhook-id, the next attempt number.
    ours = [(r.message_id, r.attempt) for r in runtime.received if r.message_id in (message_id, behind)]
    assert ours == [(message_id, 1), (message_id, 2), (behind, 1)]  # (an earlier test's put-back may come here too)
    assert runtime.overlaps == []
    assert receipt(stack, key, message_id)["message"] == "Delivered to the assistant, which replied."


def test_a_hanging_runtime_holds_only_its_own_thread(stack):
    hung_key, *others = stack.take_keys(5)
    with runtime_server() as runtime:
        env = stack.worker_env(
            runtime, ASSISTANT_TIMEOUT_SECONDS="3", ASSISTANT_RETRY_BASE_SECONDS="60", DELIVERY_CONCURRENCY="4"
        )
        worker = Worker(env, "hang")
        try:
            hung = accept(stack, hung_key, "hang")
            behind = accept(stack, hung_key, "after the hang")
            wait_until(lambda: runtime.seen(hung), 20, "the hanging attempt started")
            sent = accept_threads(stack, others, per_key=3)
            every = [m for ids in sent.values() for m in ids]
            wait_until(lambda: all_delivered(stack, every), 30, "the other threads delivered")
            others_done = max(r.ended for r in runtime.received if r.message_id in every)
            wait_until(lambda: deliveries(stack, [hung])[hung][0] == "queued", 20, "the attempt timed out")
            hung_receipt = receipt(stack, key=hung_key, message_id=hung)
        finally:
            worker.stop()
        left = deliveries(stack, [hung, behind])
        retire(stack, [hung, behind])  # its retry, due in a minute, is no other test's

    assert others_done < runtime.seen(hung)[0].started + 3  # the others went through while it hung
    assert hung_receipt["message"] == "The assistant could not be reached yet; another attempt is scheduled."
    assert left == {hung: ("queued", 1), behind: ("queued", 0)}
    assert runtime.seen(behind) == []  # its thread waits behind the retry (FIFO per thread)


def test_a_retry_in_backoff_keeps_the_thread_s_order(stack):
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        env = stack.worker_env(runtime, ASSISTANT_RETRY_BASE_SECONDS="1", ASSISTANT_RETRY_JITTER="0")
        worker = Worker(env, "backoff")
        try:
            first = accept(stack, key, "fail:2")
            second = accept(stack, key, "second")
            wait_until(lambda: all_delivered(stack, [first, second]), 30, "both delivered")
        finally:
            worker.stop()

    assert [(r.message_id, r.attempt) for r in runtime.received] == [(first, 1), (first, 2), (first, 3), (second, 1)]
    waits = [b.started - a.started for a, b in zip(runtime.received, runtime.received[1:3], strict=False)]
    assert waits[0] >= 1 and waits[1] >= 2  # backoff: 1 s, then 2 s
    assert deliveries(stack, [first, second]) == {first: ("delivered", 3), second: ("delivered", 1)}
