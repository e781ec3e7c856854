"""What the process benchmarks (bench.delivery, bench.channels, bench.chaos) set up the same way: a PostgreSQL
database of their own, the environment their gunicorn and workers run with, `manage.py`, people with a key each, a
stand-in HTTP server in a process of its own, and the CPU and memory of a process and its children.

Each harness adds its own settings and measures its own way; what it starts is started as below, so that a change
here (the database server, a setting every process needs) reaches every benchmark at once.
"""

import http.client
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench.server import ROOT, _children, _status_kib
from bench.server import cpu_seconds as cpu_seconds_of
from bench.server import free_port as free_port

SERVER_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new database on BENCH_DATABASE_URL's server, dropped afterwards (kept with BENCH_KEEP_DATABASE, to look at
    its rows or EXPLAIN a query afterwards); yields its URL."""
    name = f"{prefix}_{secrets.token_hex(3)}"
    server = urlunsplit(urlsplit(SERVER_URL)._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(SERVER_URL)._replace(path=f"/{name}"))
    finally:
        if os.environ.get("BENCH_KEEP_DATABASE"):
            print("kept:", name)
        else:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def service_environment(database_url: str, settings: dict[str, str]) -> dict[str, str]:
    """This process's environment for the service's processes, as production runs them (DEBUG off, the database
    task queue), on ``database_url``, with a harness's own ``settings`` on top. pytest's variables and a settings
    module are left out: a benchmark started from a test still measures the service's own settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    env.update(
        {
            "DEBUG": "0",
            "HTTPS_ONLY": "0",
            "SECRET_KEY": "bench-" + "x" * 50,
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "TASK_BACKEND": "database",
            "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
            **settings,
        }
    )
    return env


def use_checkout(checkout: Path) -> None:
    """Run the service's processes (``manage``, ``start``) from another version's checkout, to measure it with this
    harness (bench/ copied into it is not needed then)."""
    global ROOT
    ROOT = checkout.resolve()


def manage(arguments: list[str], env: dict[str, str]) -> str:
    """`manage.py` with these arguments; its standard output (a failure raises, with the command's output)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def migrate(env: dict[str, str]) -> None:
    manage(["migrate", "--no-input", "-v", "0"], env)


def run_python(code: str, env: dict[str, str]) -> Any:
    """Run ``code`` in `manage.py shell`; the JSON of the last line it prints."""
    return json.loads(manage(["shell", "-c", code], env).strip().splitlines()[-1])


PEOPLE_WITH_KEYS = """
import json
from django.contrib.auth import get_user_model
from keys.services import create_key
made = []
for n in range(%(count)d):
    user = get_user_model().objects.create_user(f"%(prefix)s{n}", f"%(prefix)s{n}@example.com")
    made.append(create_key(user, "%(prefix)s")[1])
print(json.dumps(made))
"""


def people_with_keys(env: dict[str, str], count: int, prefix: str) -> list[str]:
    """``count`` people (named ``prefix``0, ``prefix``1, …), each with a V2 key; their keys, in that order."""
    return list(run_python(PEOPLE_WITH_KEYS % {"count": count, "prefix": prefix}, env))


# What every stand-in server's handler may build on: HTTP/1.1 (keep-alive, as the service's clients use it), a JSON
# answer, no log line per request. Nagle's algorithm off (TCP_NODELAY): an answer goes out as two writes, headers
# then body, and with Nagle on the body waited for the client's delayed ACK of the headers, about 40 ms on a
# keep-alive connection: every delivery measured with it carried those 40 ms (bench/stand_in_latency.py shows it).
HANDLER = """
from http.server import BaseHTTPRequestHandler
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
"""

# The end of every stand-in server: a thread per connection, on a free port that it prints first.
SERVE = """
from http.server import ThreadingHTTPServer
class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    def handle_error(self, request, client_address):
        if not QUIET_ERRORS:
            super().handle_error(request, client_address)
server = Server(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def stand_in(handler: str, *argv: str, quiet_errors: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """A provider or an assistant runtime in a process of its own (its CPU is not the service's): ``handler`` is
    Python source defining the request handler class ``H`` (which may subclass ``Handler``, see HANDLER), run with
    ``argv`` as sys.argv[1:]. ``quiet_errors`` drops the tracebacks of connections that break (a harness that kills
    its clients expects them). The process and its port."""
    code = f"QUIET_ERRORS = {quiet_errors!r}\n{HANDLER}\n{handler}\n{SERVE}"
    process = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


# The assistant runtime of the delivery benchmarks (bench/delivery.py, bench/procrastinate_delivery.py): it notes the
# webhook-id of each hand-off and answers after the delay given.
RUNTIME = """
import sys, threading, time
delay, lock = float(sys.argv[1]), threading.Lock()
seen = open(sys.argv[2], "a", buffering=1)
class H(Handler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with lock:
            seen.write(self.headers.get("webhook-id", "") + "\\n")
        time.sleep(delay)
        self.answer(200, b'{"reply": "done"}')
"""


def runtime_process(delay: float, seen: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The assistant runtime in a process of its own, answering after ``delay`` seconds and noting in ``seen``
    what it was handed."""
    process, port = stand_in(RUNTIME, str(delay), str(seen))
    return process, f"http://127.0.0.1:{port}/hooks/assistant"


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A Python command (``-m gunicorn …``, ``manage.py db_worker``) in the project, silent, in a session of its
    own, so that it and its children can be killed together (kill_group)."""
    return subprocess.Popen(
        [sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def start_gunicorn(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """gunicorn as the Procfile runs it (gunicorn.conf.py), on 127.0.0.1:``port``."""
    return start(
        ["-m", "gunicorn", "--config", "gunicorn.conf.py", "config.wsgi"],
        {**env, "PORT": str(port), "BIND_HOST": "127.0.0.1"},
    )


def wait_until_up(port: int, seconds: float = 60) -> None:
    """Until gunicorn on ``port`` answers /healthz with 200 (RuntimeError after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with suppress(OSError, http.client.HTTPException):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer /healthz")


def unsettled(db: psycopg.Connection[Any]) -> int:
    """Deliveries still queued or being attempted."""
    row = db.execute("SELECT count(*) FROM conversations_delivery WHERE status IN ('queued', 'processing')").fetchone()
    return int(row[0]) if row else 0


def wait_settled(db: psycopg.Connection[Any], seconds: float, poll: float) -> float | None:
    """Seconds until no delivery is queued or being attempted, looking every ``poll`` seconds; None if that did
    not come within ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if not unsettled(db):
            return time.monotonic() - started
        time.sleep(poll)
    return None


def tree(pid: int) -> list[int]:
    """A process and its descendants."""
    found = [pid]
    for child in _children(pid):
        found += tree(child)
    return found


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user and system) these processes have used so far; a process gone counts nothing."""
    return sum(cpu_seconds_of(pid) or 0.0 for pid in pids)


def rss_mb(pid: int) -> float:
    return _status_kib(pid, "VmRSS") / 1024
