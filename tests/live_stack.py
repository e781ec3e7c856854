"""Real servers for the tests that need more than the test client: a private PostgreSQL database, Redis, gunicorn
processes, and a TCP proxy that can cut the database off. Tests that use them skip, saying why, when PostgreSQL or
Redis cannot be reached.

The tests that start these (gunicorn under load, workers killed, databases cut off, each a migrated database of its
own) share the `live_stack` xdist_group: in a parallel run one worker runs them one after another. Two at a time,
on a 2-core machine others were loading too, ran migrations past their 120 s bound."""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
NAME = "limits"  # every database these tests create carries it


def postgres_server_url() -> str:
    """The PostgreSQL server of DATABASE_URL, path set to 'postgres' (require_postgres_and_redis() first)."""
    return urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path="/postgres"))


def redis_url() -> str:
    """REDIS_URL: the Redis database the developer gave the tests (never a default: db 0 is usually someone's)."""
    return os.environ["REDIS_URL"]


def require_postgres_and_redis() -> None:
    """Skips, saying why, unless DATABASE_URL names a reachable PostgreSQL server and REDIS_URL a reachable Redis:
    the tests use only what they were given (on that server, databases of their own named limits_*, dropped after),
    never a local server found by guessing."""
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        pytest.skip("needs DATABASE_URL=postgres://… (it creates and drops its own limits_* databases there)")
    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL=redis://…/<a db number the tests own>")
    try:
        psycopg.connect(postgres_server_url(), connect_timeout=3).close()
    except psycopg.Error as error:
        pytest.skip(f"needs a reachable PostgreSQL server at DATABASE_URL ({type(error).__name__}); CI always has one")
    try:
        redis.Redis.from_url(redis_url(), socket_connect_timeout=3).ping()
    except redis.RedisError as error:
        pytest.skip(f"needs a reachable Redis at REDIS_URL ({type(error).__name__}); CI always has one")


@contextmanager
def private_database(purpose: str) -> Iterator[str]:
    """A new, migrated PostgreSQL database named after this test suite; dropped afterwards. Yields its URL."""
    name = f"{NAME}_{purpose}_{os.getpid()}_{secrets.token_hex(3)}"
    server = postgres_server_url()
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    try:
        manage(["migrate", "--no-input", "-v", "0"], {"DATABASE_URL": url})
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def service_env(**overrides: str) -> dict[str, str]:
    """Production-like settings for a server process: DEBUG off, a real secret, no test-runner shortcuts."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    env.update(
        {
            "DEBUG": "0",
            "HTTPS_ONLY": "0",  # plain HTTP on 127.0.0.1: no TLS-terminating router in front to redirect to
            "SECRET_KEY": "two-processes-" + "x" * 50,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "LOG_LEVEL": "WARNING",
            "REDIS_URL": "",
            "TASK_BACKEND": "immediate",  # the hand-off inside the request unless a test says otherwise
        }
    )
    env.update(overrides)
    return env


def manage(arguments: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT, env=service_env(**env), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"manage.py {arguments[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def run_python(code: str, env: dict[str, str]) -> Any:
    """Run Django code against a server's database (in a separate process, with its settings); returns its JSON."""
    return json.loads(manage(["shell", "-c", code], env).strip().splitlines()[-1])


class Gunicorn:
    """One gunicorn master with its workers on a free port."""

    def __init__(self, env: dict[str, str], workers: int = 2) -> None:
        # The listening socket is made here and handed over (fd://): a port only probed free could be taken by
        # another process before gunicorn bound it, and the readiness poll would then find that process instead.
        with socket.create_server(("127.0.0.1", 0), backlog=128) as listener:
            self.port = listener.getsockname()[1]
            self.log = open(f"/tmp/{NAME}-gunicorn-{self.port}.log", "w")  # noqa: SIM115
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "gunicorn", "config.wsgi:application",
                    "--bind", f"fd://{listener.fileno()}", "--workers", str(workers), "--timeout", "30",
                ],
                cwd=ROOT, env=service_env(**env), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(listener.fileno(),),
            )  # fmt: skip
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}; see {self.log.name}")
            # Any answer says it serves: an unknown API path's 404 costs nothing, where the OpenAPI schema took 14 s
            # to build on a loaded machine and two polls building it at once broke drf-spectacular's lazy loading
            # for good in that worker (every later schema a 500).
            try:
                urllib.request.urlopen(f"{self.url}/api/", timeout=5).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer within {timeout} s; see {self.log.name}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def send(base_url: str, path: str, key: str, body: Any, headers: dict[str, str] | None = None) -> Answer:
    request = urllib.request.Request(
        base_url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Answer(response.status, json.loads(response.read()), dict(response.headers))
    except urllib.error.HTTPError as error:
        return Answer(error.code, json.loads(error.read()), dict(error.headers))


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 in front of a server. ``cut()`` drops every connection and refuses new ones (the
    database went away); ``restore()`` lets connections through again."""

    def __init__(self, upstream_host: str, upstream_port: int, listen_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server((listen_host, 0))
        self.port = self.listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            self._drop(source, target)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self._lock:
                self._open.discard(sock)
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            current = list(self._open)
        self._drop(*current)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.listener.close()
