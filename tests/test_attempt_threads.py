"""The delivery engine in this process, with the openai backend calling tools against a chat-completions server on
127.0.0.1: attempt threads never open a database connection (their tools' work goes to the database threads), the
process's connections stay within 1 + DELIVERY_RECORDERS + DELIVERY_DATABASE_THREADS, and an attempt that outlasts
several leases is renewed, not taken over by a second engine. PostgreSQL (CI's second pass): the engine's threads
write at the same time. The claim's rules have their fast test on every database (tests/test_claim_rules.py)."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from assistant.models import Action, ActionState
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from delivery.engine import Engine
from ops import database_work
from reminders.models import Reminder
from tests.factories import UserFactory
from tests.servers import send_json, serving

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="SQLite's shared in-memory test database refuses concurrent writers (table locks): PostgreSQL only",
    ),
]


class Model(ThreadingHTTPServer):
    """An OpenAI-compatible chat-completions server: asks to schedule a reminder and to list them, then answers.
    ``slow`` delays the final answer (an attempt that lasts)."""

    daemon_threads = True

    def __init__(self, slow: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _ModelHandler)
        self.slow = slow
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ModelHandler(BaseHTTPRequestHandler):
    server: Model

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append(request)
        last = request["messages"][-1]
        if last["role"] == "tool":
            time.sleep(self.server.slow)
            message: dict[str, Any] = {"role": "assistant", "content": "Done."}
        else:
            text = last["content"]
            calls = [
                ("schedule_reminder", {"text": f"about {text}", "when": "2099-01-05T15:00"}),
                ("list_reminders", {}),
            ]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                    for n, (name, args) in enumerate(calls)
                ],
            }
        send_json(self, 200, json.dumps({"choices": [{"index": 0, "message": message}]}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


def model_server(slow: float = 0.0) -> AbstractContextManager[Model]:
    return serving(Model(slow))


@pytest.fixture
def openai(settings):
    settings.ASSISTANT_BACKEND = "openai"
    settings.OPENAI_MODEL = "llama3.2"
    settings.ASSISTANT_TIMEOUT_SECONDS = 10
    settings.ASSISTANT_TOOL_ROUNDS = 2
    settings.DELIVERY_RECORDERS = 2
    settings.DELIVERY_DATABASE_THREADS = 2
    yield settings
    database_work.shutdown()


@contextmanager
def connections_opened() -> Iterator[list[str]]:
    """The names of the threads that open a database connection meanwhile."""
    names: list[str] = []

    def opened(sender: Any, **kwargs: Any) -> None:
        names.append(threading.current_thread().name)

    connection_created.connect(opened)
    try:
        yield names
    finally:
        connection_created.disconnect(opened)


def accept(text: str) -> Delivery:
    conversation = conversation_of(UserFactory())
    # The person's own words (typed in the app): their tools run without asking (docs/explanation/approval.md), so
    # every attempt calls them; a key's message would wait for the person's approval instead.
    message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.APP, text=text)
    return Delivery.objects.create(message=message, conversation=conversation, endpoint=Endpoint.CONSOLE)


def wait_for(condition: Any, seconds: float) -> None:
    ends = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < ends, "timed out"
        time.sleep(0.05)


def all_delivered() -> bool:
    return not Delivery.objects.exclude(status=DeliveryStatus.DELIVERED).exists()


def test_attempt_threads_open_no_connection_and_the_process_stays_within_its_stated_count(openai):
    deliveries = [accept(f"message {n}") for n in range(6)]
    with model_server() as model, connections_opened() as opened:
        openai.OPENAI_BASE_URL = model.url
        engine = Engine(concurrency=6)
        engine.start()
        try:
            wait_for(all_delivered, 30)
        finally:
            engine.stop(grace=5)

    assert Reminder.objects.count() == len(deliveries)  # the tools ran, on the database threads
    assert set(Action.objects.values_list("state", flat=True)) == {ActionState.DONE}
    assert not [name for name in opened if name.startswith("delivery-attempt")]
    stated = 1 + openai.DELIVERY_RECORDERS + openai.DELIVERY_DATABASE_THREADS
    assert len(set(opened)) <= stated, opened
    assert any(name.startswith(database_work.THREAD_PREFIX) for name in opened)


def test_an_attempt_longer_than_its_lease_is_renewed_and_not_taken_over(openai):
    # Renewed every 0.5 s; the attempt lasts three leases. With a lease of 0.6 s, a loaded machine holding the renewing
    # thread back for 0.4 s would let it lapse, and the second engine would take the delivery over.
    openai.DELIVERY_LEASE_SECONDS = 1.5
    delivery = accept("take your time")
    with model_server(slow=4.5) as model:
        openai.OPENAI_BASE_URL = model.url
        first, second = Engine(concurrency=2), Engine(concurrency=2)
        first.start()
        wait_for(lambda: Delivery.objects.filter(status=DeliveryStatus.PROCESSING).exists(), 10)
        second.start()  # ready to take the delivery over the moment its lease lapses
        try:
            wait_for(all_delivered, 30)
        finally:
            first.stop(grace=5)
            second.stop(grace=5)

    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.takeovers) == (1, 0)
    first_turns = [r for r in model.requests if r["messages"][-1]["role"] != "tool"]
    assert len(first_turns) == 1  # one attempt reached the model
    assert Reminder.objects.count() == 1
