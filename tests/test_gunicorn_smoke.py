"""The deployment itself: gunicorn with gunicorn.conf.py and production settings, over PostgreSQL and Redis on
127.0.0.1, the way the Procfile runs it. The test makes its own database (dropped afterwards), migrates it, collects
static files into a temporary folder, boots the server on a free port, walks through what an operator and a caller
see, stops it with SIGTERM as the platform does, and reads its logs.

It runs where DATABASE_URL points at PostgreSQL and REDIS_URL is set (CI's second pass), and skips elsewhere.
"""

import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dj_database_url
import psycopg
import pytest
import redis
from psycopg import sql

from keys import tokens
from keys.models import Generation
from tests.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack")]  # see tests/live_stack.py

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).with_name("gunicorn")
CURRENT = "/api/v1/inbound/api-message"
METRICS_TOKEN = secrets.token_urlsafe(24)
ROUTER = {"X-Forwarded-Proto": "https"}  # what the PaaS router adds after terminating TLS
BOOT_SECONDS = 30


def backing_stores() -> tuple[dict, str]:
    """The PostgreSQL server (from DATABASE_URL) and the Redis URL, or a skip that says what is missing."""
    database_url, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")) or not redis_url:
        pytest.skip("the gunicorn smoke test needs DATABASE_URL=postgres://… and REDIS_URL (CI's PostgreSQL pass)")
    server = dj_database_url.parse(database_url)
    try:
        psycopg.connect(**admin_connection(server), connect_timeout=3).close()
        redis.Redis.from_url(redis_url, socket_connect_timeout=3).ping()
    except (psycopg.Error, redis.RedisError) as error:
        pytest.skip(f"PostgreSQL or Redis is unreachable: {error}")
    return server, redis_url


def admin_connection(server: dict) -> dict:
    return {
        "host": server["HOST"] or "127.0.0.1",
        "port": server["PORT"] or 5432,
        "user": server["USER"],
        "password": server["PASSWORD"] or None,
        "dbname": "postgres",
        "autocommit": True,
    }


def database_url(server: dict, name: str) -> str:
    password = f":{server['PASSWORD']}" if server["PASSWORD"] else ""
    return f"postgres://{server['USER']}{password}@{server['HOST'] or '127.0.0.1'}:{server['PORT'] or 5432}/{name}"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Server:
    port: int
    env: dict[str, str]
    workdir: Path
    process: subprocess.Popen | None = None
    logs: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, body: object = None, **headers: str) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            payload = None if body is None else json.dumps(body).encode()
            if payload is not None:
                headers.setdefault("Content-Type", "application/json")
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(GUNICORN), "--config", "gunicorn.conf.py", "config.wsgi"],
            cwd=ROOT,
            env=self.env,
            stdout=(self.workdir / "stdout.log").open("w"),
            stderr=(self.workdir / "stderr.log").open("w"),
        )
        deadline = time.monotonic() + BOOT_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"gunicorn exited:\n{(self.workdir / 'stderr.log').read_text()}"
            try:
                if self.request("GET", "/healthz").status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"gunicorn did not answer within {BOOT_SECONDS} s")

    def stop(self) -> int:
        """SIGTERM, as the platform sends on a deploy; gunicorn lets workers finish, then exits."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.logs = {name: (self.workdir / f"{name}.log").read_text() for name in ("stdout", "stderr")}
        return self.process.returncode


def production_env(**settings: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST", "DJANGO"))}
    overridden = (
        "DEBUG",
        "PROMETHEUS_MULTIPROC_DIR",
        "HTTPS_ONLY",
        "SENTRY_DSN",
        "ACCESS_LOG",
        "LOG_FORMAT",
        "TASK_BACKEND",
    )
    for name in overridden:
        env.pop(name, None)
    env.update(
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        BIND_HOST="127.0.0.1",
        WEB_CONCURRENCY="2",
        WEB_THREADS="2",
        METRICS_TOKEN=METRICS_TOKEN,
        CACHE_KEY_PREFIX=f"smoke-{secrets.token_hex(4)}",  # counters of this run only, in a shared Redis database
        TASK_BACKEND="database",  # as in production: the hand-off waits in PostgreSQL for the worker process
    )
    env.update(settings)
    return env


@pytest.fixture
def production(production_server: Server) -> Server:
    """The module's server, started again when a test before this one stopped it (the journey ends with SIGTERM):
    the tests run in random order."""
    if production_server.process is None or production_server.process.poll() is not None:
        production_server.start()
    return production_server


@pytest.fixture(scope="module")
def production_server(tmp_path_factory) -> Iterator[Server]:
    server_settings, redis_url = backing_stores()
    name = f"smoke_prod_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(**admin_connection(server_settings)) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    workdir = tmp_path_factory.mktemp("gunicorn")
    port = free_port()
    env = production_env(
        DATABASE_URL=database_url(server_settings, name),
        REDIS_URL=redis_url,
        STATIC_ROOT=str(workdir / "staticfiles"),
        PORT=str(port),
    )
    server = Server(port=port, env=env, workdir=workdir)
    try:
        server.manage("migrate", "--no-input")
        server.manage("collectstatic", "--no-input")
        server.start()
        yield server
    finally:
        if server.process is not None:
            server.stop()
        with psycopg.connect(**admin_connection(server_settings)) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def hashed_static_path(server: Server, name: str) -> str:
    manifest = json.loads((Path(server.env["STATIC_ROOT"]) / "staticfiles.json").read_text())
    return "/static/" + manifest["paths"][name]


def count_messages(server: Server) -> int:
    with psycopg.connect(server.env["DATABASE_URL"]) as db:
        row = db.execute("SELECT count(*) FROM conversations_message WHERE role = 'user'").fetchone()
    assert row is not None
    return row[0]


def raw_exchange(server: Server, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send bytes as they are (http.client would refuse to) and read the whole answer: status line, headers, body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(request)
        answer = connection.makefile("rb").read()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return status_line, headers, body


@pytest.mark.parametrize(
    ("request_bytes", "status_line", "code"),
    [
        (b"POST /api/v1/inbound/api-message?" + b"x" * 5000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
         "HTTP/1.1 414 URI Too Long", "uri_too_long"),
        (b"POST /api/v1/inbound/api-message HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Filler: y\r\n" * 120 + b"\r\n",
         "HTTP/1.1 431 Request Header Fields Too Large", "headers_too_large"),
        (b"POST /api/v1/inbound/api-message HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n",
         "HTTP/1.1 400 Bad Request", "bad_request"),
    ],
)  # fmt: skip
def test_requests_gunicorn_refuses_before_django_get_json_too(production, request_bytes, status_line, code):
    got_status, headers, body = raw_exchange(production, request_bytes)

    assert got_status == status_line
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["code"] == code
    assert production.request("GET", "/healthz").status == 200  # the worker that refused it serves on


def test_the_production_server_journey(production):
    key = production.manage("createapikey", "--email", "smoke@example.com", "--name", "smoke").strip().splitlines()[-1]

    # The platform's probes.
    assert production.request("GET", "/healthz").json() == {"status": "ok"}
    ready = production.request("GET", "/readyz")
    assert (ready.status, ready.json()["checks"]) == (200, {"database": "ok", "cache": "ok"})

    # A caller's message, through the router (HTTPS); it is recorded.
    sent = production.request("POST", CURRENT, {"message": "Smoke test"}, Authorization=f"Bearer {key}", **ROUTER)
    assert sent.status == 200, sent.body
    assert sent.json()["success"] is True
    assert count_messages(production) == 1
    assert sent.headers["strict-transport-security"].startswith("max-age=31536000")
    assert sent.headers["x-content-type-options"] == "nosniff"
    assert re.fullmatch(r"[0-9a-f]{32}", sent.headers["x-request-id"])

    # The Procfile's worker hands it to the assistant (here: one batch, then it exits).
    production.manage("db_worker", "--batch", "--no-reload", "--no-startup-delay")

    # A wrong key is refused.
    wrong = key[:-1] + ("y" if key.endswith("x") else "x")  # never the key itself (it ends in "x" one time in 62)
    refused = production.request("POST", CURRENT, {"message": "hi"}, Authorization=f"Bearer {wrong}", **ROUTER)
    assert refused.status == 401
    assert refused.json()["code"] == "invalid_api_key"
    assert count_messages(production) == 1

    # Plain HTTP is sent to HTTPS.
    plain = production.request("POST", CURRENT, {"message": "hi"}, Authorization=f"Bearer {key}")
    assert plain.status == 301
    assert plain.headers["location"] == f"https://127.0.0.1:{production.port}{CURRENT}"

    # A static file: collected under a hashed name, compressed, cached for a year.
    static = production.request(
        "GET", hashed_static_path(production, "admin/css/base.css"), **{"Accept-Encoding": "gzip"}, **ROUTER
    )
    assert static.status == 200
    assert static.headers["content-encoding"] == "gzip"
    assert "immutable" in static.headers["cache-control"]
    max_age = int(re.search(r"max-age=(\d+)", static.headers["cache-control"]).group(1))  # type: ignore[union-attr]
    assert max_age >= 365 * 24 * 3600

    # The admin's pages come with the Content Security Policy.
    login = production.request("GET", "/admin/login/", **ROUTER)
    assert login.status == 200
    assert "'nonce-" in login.headers["content-security-policy"]
    assert login.headers["x-frame-options"] == "DENY"

    # Metrics: for the operator's token only; counted across both workers.
    assert production.request("GET", "/metrics").status == 401
    scraped = production.request("GET", "/metrics", Authorization=f"Bearer {METRICS_TOKEN}").body.decode()
    assert 'ingest_messages_accepted_total{endpoint="api_message"} 1.0' in scraped
    assert 'ingest_requests_rejected_total{endpoint="api_message",reason="invalid_api_key"} 1.0' in scraped
    assert 'http_requests_total{endpoint="api_message",method="POST",status="200"} 1.0' in scraped
    assert 'ingest_deliveries{status="delivered"} 1.0' in scraped

    # Stopped the way the platform stops it: SIGTERM, a clean exit.
    assert production.stop() == 0
    assert "Shutting down: Master" in production.logs["stderr"]

    # Logs: one JSON line per request (gunicorn's own access line is off), the accepted one with the key's id and hint.
    everything = production.logs["stdout"] + production.logs["stderr"]
    assert key not in everything
    assert key[:-1] not in everything
    assert "Bearer" not in everything
    assert METRICS_TOKEN not in everything
    assert not re.search(rf'"POST {CURRENT} HTTP/1.1" 200', everything)  # no second, gunicorn-format line
    logged = [json.loads(line) for line in production.logs["stderr"].splitlines() if '"logger":"access"' in line]
    api_lines = [line for line in logged if line["path"].startswith("/api/")]
    assert [(line["status"], line["code"]) for line in api_lines] == [
        (200, None),
        (401, "invalid_api_key"),
        (301, None),
    ]
    accepted = api_lines[0]
    assert accepted["request_id"] == sent.headers["x-request-id"]
    assert accepted["key_hint"] == tokens.hint(key)
    assert isinstance(accepted["key_id"], int) and isinstance(accepted["user_id"], int)


def test_without_its_database_and_cache_the_server_is_alive_but_not_ready(tmp_path):
    backing_stores()
    port = free_port()
    env = production_env(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/nothing_listens_here",
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        PORT=str(port),
        WEB_CONCURRENCY="1",
    )
    server = Server(port=port, env=env, workdir=tmp_path)
    well_formed = tokens.generate(Generation.V2)
    server.start()
    try:
        assert server.request("GET", "/healthz").status == 200
        ready = server.request("GET", "/readyz")
        assert ready.status == 503
        assert ready.json() == {"status": "unavailable", "checks": {"database": "unreachable", "cache": "unreachable"}}

        refused = server.request("POST", CURRENT, {"message": "hi"}, Authorization=f"Bearer {well_formed}", **ROUTER)
        assert refused.status == 503
        assert refused.json()["code"] == "service_unavailable"
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.logs["stderr"]
