"""What the delivery engine's tests run against: a private PostgreSQL database, gunicorn accepting messages, real
worker processes (the Procfile's `manage.py worker`), and an assistant runtime on 127.0.0.1 that records what it
receives, when, and whether two messages of one thread were ever with it at the same time."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.live_stack import NAME, ROOT, Gunicorn, private_database, require_postgres_and_redis, run_python, service_env
from tests.servers import send_json
from tests.test_webhook_backend import SECRET

USERS_SETUP = """
import json
from django.contrib.auth import get_user_model
from keys.services import create_key
made = []
for n in range(%d):
    user = get_user_model().objects.create_user(f"person{n}", f"person{n}@example.com")  # no password: no hashing
    made.append(create_key(user, "script")[1])
print(json.dumps(made))
"""


@dataclass
class Received:
    message_id: str
    user_id: int
    attempt: int
    text: str
    started: float
    ended: float = 0.0


@dataclass
class Runtime:
    """The assistant runtime. What it does with a message depends on its text: "hang" holds the request until the
    client gives up, "slow:S" answers after S seconds, "fail:K" answers 503 to the first K attempts; anything else
    is answered after ``delay`` seconds with a reply."""

    delay: float = 0.0
    received: list[Received] = field(default_factory=list)
    overlaps: list[tuple[int, str]] = field(default_factory=list)  # (user, message) sent while another was open
    most_at_once: int = 0
    _active: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    _open: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def seen(self, message_id: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.message_id == message_id]

    def handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = body["data"]
        entry = Received(
            data["message"]["id"], data["user"]["id"], data["attempt"], data["message"]["text"], time.time()
        )
        with self._lock:
            self.received.append(entry)
            self._active[entry.user_id] += 1
            if self._active[entry.user_id] > 1:
                self.overlaps.append((entry.user_id, entry.message_id))
            self._open += 1
            self.most_at_once = max(self.most_at_once, self._open)
        try:
            text = entry.text
            if text == "hang":
                self._release.wait(60)
                return 200, {"reply": "too late"}
            if text.startswith("fail:") and len(self.seen(entry.message_id)) <= int(text.split(":")[1]):
                return 503, {"error": "busy"}
            delay = float(text.split(":")[1]) if text.startswith("slow:") else self.delay
            time.sleep(delay)
            return 200, {"reply": f"done: {text}"}
        finally:
            with self._lock:
                self._active[entry.user_id] -= 1
                self._open -= 1
            entry.ended = time.time()

    def release(self) -> None:
        self._release.set()


def _handler_for(runtime: Runtime) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real runtime offers

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, answer = runtime.handle(body)
            raw = json.dumps(answer).encode()
            with suppress(OSError):  # the client gave up (its deadline)
                send_json(self, status, raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def runtime_server(delay: float = 0.0) -> Iterator[Runtime]:
    runtime = Runtime(delay=delay)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(runtime))
    server.daemon_threads = True
    server.block_on_close = False
    runtime.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/assistant"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield runtime
    finally:
        runtime.release()
        server.shutdown()
        server.server_close()


DB_WORKER = ["manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2"]


class Worker:
    """One `manage.py worker --no-reload` process, as the Procfile runs it (or another command)."""

    def __init__(self, env: dict[str, str], name: str, command: list[str] = DB_WORKER) -> None:
        self.log_path = f"/tmp/{NAME}-{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT, env=service_env(**env), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as log:
            return log.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@dataclass
class Stack:
    env: dict[str, str]
    gunicorn: Gunicorn
    keys: list[str]
    _next_key: int = 0

    def take_keys(self, count: int) -> list[str]:
        """Keys of people no other test has used: each a thread of its own."""
        taken = self.keys[self._next_key : self._next_key + count]
        assert len(taken) == count, "the stack has too few users for this test"
        self._next_key += count
        return taken

    def worker_env(self, runtime: Runtime, **overrides: str) -> dict[str, str]:
        return {
            **self.env,
            "ASSISTANT_BACKEND": "webhook",
            "ASSISTANT_WEBHOOK_URL": runtime.url,
            "ASSISTANT_WEBHOOK_SECRET": SECRET,
            "LOG_LEVEL": "INFO",
            **overrides,
        }


@contextmanager
def delivery_stack(users: int, **extra_env: str) -> Iterator[Stack]:
    require_postgres_and_redis()
    with private_database("delivery") as database_url:
        env = {
            "DATABASE_URL": database_url,
            "TASK_BACKEND": "database",
            "INGEST_RATE_LIMIT": "100000/h",
            "ASSISTANT_WEBHOOK_SECRET": SECRET,
            **extra_env,
        }
        keys = run_python(USERS_SETUP % users, env)
        gunicorn = Gunicorn(env)
        try:
            yield Stack(env, gunicorn, keys)
        finally:
            gunicorn.stop()


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll until ``condition()`` is truthy (bounded: a test fails rather than hangs)."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")
