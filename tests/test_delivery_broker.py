"""Deliveries through a broker (DELIVERY_BROKER_URL): Dramatiq on RabbitMQ, with gunicorn accepting messages, real
Dramatiq worker processes and an assistant runtime on 127.0.0.1; PostgreSQL as the ledger.

Each thread's messages in order and each exactly once with two worker processes; a worker killed mid-attempt and the
delivery recovered by the other with no command. Skips, saying why, where RabbitMQ, PostgreSQL or Redis cannot be
reached (they run on the development machines and in CI)."""

import contextlib
import os
import secrets
import signal
import socket

import pika
import pytest

from tests.delivery_stack import Stack, Worker, delivery_stack, runtime_server, wait_until
from tests.test_delivery_engine import accept, accept_threads, all_delivered, deliveries, receipt

BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def dramatiq_worker(stack: Stack, env: dict[str, str], name: str) -> Worker:
    command = ["-m", "dramatiq", "delivery.dramatiq_worker", "--processes", "1", "--threads", "8"]
    return Worker(env, name, [*command, "--worker-shutdown-timeout", "5000"])


@pytest.fixture(scope="module")
def stack():
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=3).close()
    except OSError as error:
        pytest.skip(f"needs RabbitMQ on 127.0.0.1:5672 ({type(error).__name__})")
    queue = f"deliveries-test-{secrets.token_hex(4)}"  # this run's own queue on the shared broker
    with delivery_stack(users=30, DELIVERY_BROKER_URL=BROKER_URL, DELIVERY_BROKER_QUEUE=queue) as made:
        yield made
    with pika.BlockingConnection(pika.URLParameters(BROKER_URL)) as connection:
        channel = connection.channel()
        for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
            channel.queue_delete(name)


def test_two_broker_workers_deliver_each_thread_in_order_each_message_once(stack):
    keys = stack.take_keys(10)
    with runtime_server(delay=0.03) as runtime:
        env = stack.worker_env(runtime)
        workers = [dramatiq_worker(stack, env, "dramatiq-a"), dramatiq_worker(stack, env, "dramatiq-b")]
        try:
            sent = accept_threads(stack, keys, per_key=5)
            every = [m for ids in sent.values() for m in ids]
            wait_until(lambda: all_delivered(stack, every), 60, "every message delivered")
        finally:
            for worker in workers:
                worker.stop()

    ids = [r.message_id for r in runtime.received]
    assert sorted(ids) == sorted(every)  # each exactly once
    for thread in sent.values():
        assert [m for m in ids if m in thread] == thread  # acceptance order
    assert runtime.overlaps == []
    assert runtime.most_at_once > 1


def test_a_broker_worker_killed_mid_attempt_is_recovered_by_another(stack):
    [key] = stack.take_keys(1)
    with runtime_server() as runtime:
        env = stack.worker_env(runtime, ASSISTANT_TIMEOUT_SECONDS="4", DELIVERY_LEASE_SECONDS="3")
        doomed = dramatiq_worker(stack, env, "dramatiq-doomed")
        try:
            message_id = accept(stack, key, "slow:2")
            behind = accept(stack, key, "behind")
            wait_until(lambda: runtime.seen(message_id), 30, "the first attempt started")
            for pid in _process_group(doomed):
                _kill(pid)
            doomed.wait(timeout=10)
        finally:
            doomed.stop()
        assert receipt(stack, key, message_id)["status"] == "processing"
        survivor = dramatiq_worker(stack, env, "dramatiq-survivor")
        try:
            wait_until(lambda: all_delivered(stack, [message_id, behind]), 60, "recovered with no command")
        finally:
            survivor.stop()

    assert deliveries(stack, [message_id, behind]) == {message_id: ("delivered", 2), behind: ("delivered", 1)}
    ours = [(r.message_id, r.attempt) for r in runtime.received if r.message_id in (message_id, behind)]
    assert ours == [(message_id, 1), (message_id, 2), (behind, 1)]  # (an earlier test's put-back may come here too)


def _process_group(worker: Worker) -> list[int]:
    """Dramatiq's main process and its worker processes (it forks them)."""
    pgid = os.getpgid(worker.process.pid)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
