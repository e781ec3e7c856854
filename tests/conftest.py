import json
import runpy
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.servers.basehttp import ThreadedWSGIServer
from django.db import connection
from django.test import Client
from django.test.testcases import LiveServerThread

from channels import senders
from ingestion.hotpath import recent
from keys.models import Generation
from tests.browser import SKIP_REASON as NO_BROWSER
from tests.factories import UserFactory, make_key

# The suite's own rules (random order's seed, the stores it may touch, no environment leaks): a plain plugin module,
# so that tests/test_suite_safety.py can load it into a fresh pytest on a probe file.
pytest_plugins = ["tests.suite", "tests.providers"]

FIXTURES = Path(__file__).parent / "fixtures"

CURRENT = "/api/v1/inbound/api-message"
LEGACY = "/api/v1/inbound-sms/webhook"


def fixture_body(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Skipped browser tests in a banner (tests/browser/conftest.py skips them without Chromium). Counted from the
    reports, which pytest-xdist's workers send back: the main process of a parallel run collects nothing."""
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if NO_BROWSER in str(report.longrepr)]
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} BROWSER TESTS SKIPPED: {NO_BROWSER}", yellow=True, bold=True)


# Held while the live server runs a request, and by the test's own thread around each statement it runs on the shared
# in-memory SQLite connection (see _tests_statements_wait_for_the_live_server): re-entrant, because a request's
# statements take it again on the thread that already holds it.
_SERVING = threading.RLock()


class _OneRequestAtATime(ThreadedWSGIServer):
    """Django's threaded live server, with the application run by one thread at a time: connections are still
    accepted and read in parallel (a browser's idle preconnected sockets must not block anyone), but the requests'
    database work never overlaps."""

    _serving = _SERVING

    def set_app(self, application: Any) -> None:
        def one_at_a_time(environ: Any, start_response: Any) -> list[bytes]:
            with self._serving:
                response = application(environ, start_response)
                try:
                    return list(response)
                finally:
                    if hasattr(response, "close"):
                        response.close()

        super().set_app(one_at_a_time)


@pytest.fixture(scope="session", autouse=True)
def _live_server_serves_one_request_at_a_time_on_in_memory_sqlite() -> Any:
    """On SQLite the test database lives in memory, and the live server's threads share the test's one connection
    to it. A page that polls (the conversation) while the browser loads the next page used it from two threads at
    once: "bad parameter or other API misuse" and a 500 in a browser journey, now and then. One request at a time
    removes that; PostgreSQL runs keep Django's own server."""
    if connection.vendor != "sqlite":
        yield
        return
    threaded = LiveServerThread.server_class
    LiveServerThread.server_class = _OneRequestAtATime
    yield
    LiveServerThread.server_class = threaded


def _one_statement_at_a_time(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    with _SERVING:
        return execute(sql, params, many, context)


@pytest.fixture(autouse=True)
def _tests_statements_wait_for_the_live_server(request: pytest.FixtureRequest) -> Any:
    """A test that writes while a page polls (a browser journey) used the one in-memory SQLite connection at the same
    time as the server's request: "database table is locked", a 503 the page logged. Its statements now wait for the
    request in flight, as the server's own requests wait for each other."""
    if "live_server" not in request.fixturenames or connection.vendor != "sqlite":
        yield
        return
    with connection.execute_wrapper(_one_statement_at_a_time):
        yield


GUNICORN_CONF = Path(__file__).resolve().parent.parent / "gunicorn.conf.py"
GUNICORN_SETTINGS = (
    "PORT", "BIND_HOST", "WEB_CONCURRENCY", "WEB_THREADS", "GUNICORN_TIMEOUT", "ACCESS_LOG", "REUSE_PORT",
    "PROMETHEUS_MULTIPROC_DIR",
)  # fmt: skip


@pytest.fixture
def gunicorn_conf(monkeypatch) -> Any:
    """Reads gunicorn.conf.py under a given environment, as gunicorn does (runpy); whatever it writes to os.environ
    (PROMETHEUS_MULTIPROC_DIR) and gunicorn's error writer, which it replaces, are undone afterwards. Loading it any
    other way leaves the counters' folder set in the environment for every later test."""
    from gunicorn import util as gunicorn_util

    monkeypatch.setattr(gunicorn_util, "write_error", gunicorn_util.write_error)
    for name in GUNICORN_SETTINGS:
        monkeypatch.setenv(name, "placeholder")  # remembers the real value (or its absence) for the teardown
        monkeypatch.delenv(name)

    def load(**env: str) -> dict[str, Any]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(str(GUNICORN_CONF))

    return load


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()
    recent.forget_all()  # keys a previous test's requests left remembered in this process
    senders.forget_all()  # and linked addresses


@pytest.fixture
def user(db):
    user = UserFactory(email="sam@example.com")
    user.profile.phone_number = "+14155551234"
    user.profile.channel = "whatsapp"
    user.profile.save()
    return user


@pytest.fixture
def v2(user):
    return make_key(user, "github actions", Generation.V2)


@pytest.fixture
def v1(user):
    return make_key(user, "old shortcut", Generation.V1)


def post(
    client: Client,
    path: str,
    key: str | None = None,
    body: Any = None,
    *,
    raw: bytes | str | None = None,
    content_type: str = "application/json",
    **headers: str,
):
    """POST like an automation would: a Bearer key and a JSON body (or raw bytes to send as they are)."""
    if key is not None:
        headers.setdefault("Authorization", f"Bearer {key}")
    data = raw if raw is not None else json.dumps(body)
    return client.post(path, data=data, content_type=content_type, headers=headers)


@pytest.fixture
def assistant_server():
    """A real HTTP server on 127.0.0.1 playing the remote assistant (see tests/servers.py)."""
    from tests.servers import scripted_server

    with scripted_server() as server:
        yield server


@pytest.fixture
def llm(settings, assistant_server):
    """The model-backed assistant (ASSISTANT_BACKEND=openai) whose OpenAI-compatible model is assistant_server:
    script its answers with llm.answer(200, completion(...)) (tests/test_assistant_tools.py)."""
    settings.ASSISTANT_BACKEND = "openai"
    settings.OPENAI_BASE_URL = assistant_server.url + "/v1"
    settings.ASSISTANT_TIMEOUT_SECONDS = 5
    return assistant_server


@pytest.fixture
def send(client, django_capture_on_commit_callbacks):
    """POST like `post`, then run what the commit triggers, as a real request does: with the immediate task
    backend that is the hand-off to the assistant."""

    def send(key: str, body: Any, path: str = CURRENT, **headers: str):
        with django_capture_on_commit_callbacks(execute=True):
            return post(client, path, key, body, **headers)

    return send


# The official clients against the live server (tests/clients.py).


@pytest.fixture
def poke_home(tmp_path):
    from tests.clients import ClientHome

    return ClientHome(tmp_path / "client-home")


@pytest.fixture
def poke_cli(live_server, poke_home):
    """The unmodified npm `poke` CLI with its own home, pointed at the live server (skips without node or the
    package: `make clients`)."""
    from tests.clients import PokeCli, require_cli

    require_cli()
    return PokeCli(poke_home, api=f"{live_server.url}/api/v1", frontend=live_server.url)


@pytest.fixture
def poke_sdk_env(live_server, poke_home, monkeypatch):
    """The PyPI SDK in this process pointed at the live server, with poke_home's credentials file and no
    POKE_API_KEY. Returns the API base URL."""
    from tests.clients import sdk_environment

    api = f"{live_server.url}/api/v1"
    sdk_environment(monkeypatch, poke_home, api)
    return api


# Mail and calendar servers on 127.0.0.1 (tests/mail_servers.py): Radicale, Dovecot, aiosmtpd.


@pytest.fixture
def radicale_server(tmp_path):
    """Radicale in this process with the user ann (an empty calendar "personal"); cheap enough to be per test."""
    import caldav

    from tests.mail_servers import PASSWORD, radicale

    with radicale(tmp_path, {"ann": PASSWORD}) as server:
        caldav.DAVClient(url=server.url, username="ann", password=PASSWORD).principal().make_calendar(
            name="Personal", cal_id="personal"
        )
        yield server


@pytest.fixture(scope="session")
def dovecot_server():
    from tests.mail_servers import dovecot

    with dovecot() as server:
        yield server


@pytest.fixture(scope="session")
def smtp_server():
    from tests.mail_servers import smtp

    with smtp() as server:
        yield server


@pytest.fixture
def mail_user(dovecot_server, smtp_server):
    """A fresh IMAP account (an empty inbox) on the shared Dovecot; SMTP's record of received mail emptied."""
    smtp_server.received.clear()
    smtp_server.envelopes.clear()
    return dovecot_server.next_user()
