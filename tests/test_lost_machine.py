"""A lost machine, simulated: two delivery workers (`manage.py worker`, as the Procfile runs it), each in a network
namespace of its own that this test creates (`ip netns`, a veth pair, addresses the test assigns), reach PostgreSQL
and the assistant runtime only over their link. The first claims every message and is cut off mid-attempt (its link
set down): its leases stop being renewed, expire, and the second worker takes the deliveries over as attempt 2.
Each message gets exactly one reply in its thread; the runtime sees each message at most twice (the documented
duplicate: a lease that expired after the hand-over, same webhook-id); and when the link comes back, the first
worker's late outcomes are refused.

Traffic stays between this machine and the namespaces made here. PostgreSQL listens on 127.0.0.1 only, so a TCP
proxy on each link's host-side address forwards to it. Needs root (to create namespaces) and PostgreSQL (CI's second
pass); skips, saying why, elsewhere. Short leases (3 s) keep it well under a minute."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from tests.delivery_stack import SECRET, wait_until
from tests.factories import UserFactory
from tests.live_stack import CuttableProxy, service_env
from tests.servers import send_json

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack"), pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_SECONDS = 2.0  # each hand-over to the second worker takes this long
# Renewed every second: a loaded machine may hold a renewal back by a second or more (2 s leases, renewed every 0.7 s,
# could lapse then, and the survivor would take a delivery over while the first worker still lived).
LEASE_SECONDS = "3"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class Link:
    namespace: str
    host_side: str  # the interface in this (the root) namespace
    host_address: str
    inner_address: str

    def down(self) -> None:
        _ip("link", "set", self.host_side, "down")

    def up(self) -> None:
        _ip("link", "set", self.host_side, "up")


@contextmanager
def machine(number: int) -> Iterator[Link]:
    """A network namespace joined to this one by a veth pair: 10.231.<n>.1 here, 10.231.<n>.2 there."""
    tag = f"{os.getpid() % 100000}{number}"
    link = Link(f"h22lost{tag}", f"lmh{tag}", f"10.231.{number}.1", f"10.231.{number}.2")
    inner = f"lmn{tag}"
    _ip("netns", "add", link.namespace)
    try:
        _ip("link", "add", link.host_side, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", link.namespace)
        _ip("addr", "add", f"{link.host_address}/24", "dev", link.host_side)
        _ip("link", "set", link.host_side, "up")
        for command in (
            ["addr", "add", f"{link.inner_address}/24", "dev", inner],
            ["link", "set", inner, "up"],
            ["link", "set", "lo", "up"],
        ):
            _ip("netns", "exec", link.namespace, "ip", *command)
        yield link
    finally:
        with suppress(subprocess.SubprocessError):
            _ip("link", "del", link.host_side)
        with suppress(subprocess.SubprocessError):
            _ip("netns", "del", link.namespace)


def namespaces_unavailable() -> str | None:
    if connection.vendor != "postgresql":
        return "the workers share the test's PostgreSQL database (CI's PostgreSQL pass)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` (.ci/run installs it)"
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    probe = f"h22probe{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
    except subprocess.SubprocessError as error:
        return f"cannot create a network namespace here ({error})"
    _ip("netns", "del", probe)
    return None


@dataclass
class Runtime:
    """The assistant runtime, answering each hand-over after RUNTIME_SECONDS; records who sent what. What comes from
    ``held`` is answered only once ``release`` is set: the cut-off worker's answers reach it after it is back."""

    held: str = ""
    release: threading.Event = field(default_factory=threading.Event)
    received: list[tuple[str, int, str]] = field(default_factory=list)  # (message id, attempt, sender's address)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def from_sender(self, address: str) -> list[tuple[str, int]]:
        with self.lock:
            return [(m, a) for m, a, sender in self.received if sender == address]


@contextmanager
def runtime_on(runtime: Runtime, address: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["data"]
            with runtime.lock:
                runtime.received.append((data["message"]["id"], data["attempt"], self.client_address[0]))
            if self.client_address[0] == runtime.held:
                runtime.release.wait(60)
            else:
                time.sleep(RUNTIME_SECONDS)
            raw = json.dumps({"reply": f"done: {data['message']['text']}"}).encode()
            with suppress(OSError):
                send_json(self, 200, raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://{address}:{server.server_address[1]}/hooks/assistant"
    finally:
        server.shutdown()
        server.server_close()


class NamespacedWorker:
    """`manage.py worker` inside a namespace, reaching PostgreSQL and the runtime over its link only."""

    def __init__(self, link: Link, database_url: str, runtime_url: str) -> None:
        self.log_path = f"/tmp/h22-lost-{link.namespace}-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115
        env = service_env(
            DATABASE_URL=database_url,
            DATABASE_CONNECT_TIMEOUT="2",
            TASK_BACKEND="database",
            ASSISTANT_BACKEND="webhook",
            ASSISTANT_WEBHOOK_URL=runtime_url,
            ASSISTANT_WEBHOOK_SECRET=SECRET,
            ASSISTANT_TIMEOUT_SECONDS="120",  # the cut-off worker keeps waiting, to receive its answers late
            DELIVERY_LEASE_SECONDS=LEASE_SECONDS,
            DELIVERY_CONCURRENCY="8",
            LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",  # its log is read while it runs
        )
        command = ["ip", "netns", "exec", link.namespace, sys.executable, "manage.py", "db_worker", "--no-reload"]
        command += ["--no-startup-delay", "--interval", "0.2"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        self.log.flush()
        return Path(self.log_path).read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def accept(text: str) -> Delivery:
    conversation = conversation_of(UserFactory())
    message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.API, text=text)
    return Delivery.objects.create(message=message, conversation=conversation, endpoint=Endpoint.CURRENT)


def test_a_worker_cut_off_mid_attempt_loses_its_deliveries_to_the_other_and_its_late_outcomes_are_refused():
    unavailable = namespaces_unavailable()
    if unavailable:
        pytest.skip(unavailable)
    deliveries = [accept(f"message {n}") for n in range(6)]
    ids = {d.message.public_id for d in deliveries}
    database = connection.settings_dict
    with ExitStack() as stack:
        first, second = stack.enter_context(machine(1)), stack.enter_context(machine(2))
        runtime = Runtime(held=first.inner_address)  # the first worker's attempts stay open until it is cut off
        workers = []
        for link in (first, second):
            proxy = CuttableProxy("127.0.0.1", int(database["PORT"] or 5432), listen_host=link.host_address)
            stack.callback(proxy.close)
            url = f"postgres://{database['USER']}@{link.host_address}:{proxy.port}/{database['NAME']}"
            runtime_url = stack.enter_context(runtime_on(runtime, link.host_address))
            workers.append((link, url, runtime_url))

        cut_off = NamespacedWorker(*workers[0])
        stack.callback(cut_off.stop)
        wait_until(lambda: len(runtime.from_sender(first.inner_address)) == len(ids), 60, "the first worker took all")
        survivor = NamespacedWorker(*workers[1])
        stack.callback(survivor.stop)
        stack.callback(runtime.release.set)
        wait_until(lambda: "delivery engine started" in survivor.output(), 60, "the second worker running")
        time.sleep(float(LEASE_SECONDS) * 1.5)  # longer than a lease: renewed, not taken over, while the first lives
        assert set(Delivery.objects.values_list("attempts", "takeovers")) == {(1, 0)}
        first.down()  # mid-attempt: its runtime calls are open, its leases renewed until now

        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == len(ids),
            60,
            "every delivery taken over and delivered by the second worker",
        )
        first.up()
        runtime.release.set()  # its answers arrive now, long after its leases were taken over
        wait_until(
            lambda: cut_off.output().count("no longer holds it") >= len(ids),
            30,
            f"the cut-off worker's late outcomes refused (its log: {cut_off.log_path})",
        )

    for delivery in Delivery.objects.select_related("message", "reply"):
        assert (delivery.status, delivery.attempts, delivery.takeovers) == (DeliveryStatus.DELIVERED, 2, 1)
        assert delivery.reply.text == f"done: {delivery.message.text}"
        assert Message.objects.filter(conversation=delivery.conversation, role=Role.ASSISTANT).count() == 1
    assert sorted(runtime.from_sender(first.inner_address)) == sorted((m, 1) for m in ids)
    assert sorted(runtime.from_sender(second.inner_address)) == sorted((m, 2) for m in ids)
