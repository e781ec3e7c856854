"""The console with its database or Redis away (issue 18 item 16): 503 with Retry-After, JSON where the page asked
for JSON, never a 500; and log-in keeps working without Redis (the log-in limit counts in the process meanwhile).

Redis "away" is a real Redis client pointed at a port on 127.0.0.1 where nothing listens (connection refused), the
way a stopped Redis looks; the database away is a real gunicorn whose DATABASE_URL points at such a port."""

import json
import re
import socket
import urllib.error
import urllib.request
from http.cookiejar import CookieJar

import pytest
from django.test import Client

from ops import limits
from tests.factories import UserFactory
from tests.live_stack import Gunicorn, manage
from tests.ports import free_port

pytestmark = pytest.mark.django_db

PASSWORD = "a long and uncommon passphrase"


def nothing_listens() -> int:
    port = free_port()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return port


@pytest.fixture
def redis_away(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "ingestion.hotpath.cache.AtomicIncrRedisCache",
            "LOCATION": f"redis://127.0.0.1:{nothing_listens()}/0",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
    limits._fallback.clear()
    yield
    limits._fallback.clear()


@pytest.fixture
def person():
    user = UserFactory(username="ada@example.com", email="ada@example.com")
    user.set_password(PASSWORD)
    user.save()
    return user


def log_in(client: Client, password: str):
    return client.post("/login/", {"username": "ada@example.com", "password": password})


def test_log_in_works_without_redis(redis_away, person):
    client = Client(raise_request_exception=False)
    assert log_in(client, "a wrong guess").status_code == 200  # the form again, with its error; not a 500

    answer = log_in(client, PASSWORD)

    assert answer.status_code == 302
    assert client.get("/conversation/").status_code == 200


def test_without_redis_the_log_in_limit_still_holds_in_the_process(redis_away, person, settings):
    settings.LOGIN_FAILURE_RATE_LIMIT = "3/15m"
    client = Client(raise_request_exception=False)
    for _ in range(3):
        assert log_in(client, "a guess").status_code == 200

    refused = log_in(client, PASSWORD)

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0


def test_a_page_that_needs_redis_answers_503_with_retry_after(redis_away, person):
    # Add API Key issues a one-time form token, kept in the cache.
    client = Client(raise_request_exception=False)
    client.force_login(person)

    page = client.get("/keys/new/")

    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert "Briefly unavailable" in page.content.decode()


def test_a_console_request_that_asks_for_json_gets_a_json_503(redis_away, person):
    client = Client(raise_request_exception=False)
    client.force_login(person)
    answer = client.get("/keys/new/", headers={"Accept": "application/json"})

    assert answer.status_code == 503
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["code"] == "service_unavailable"
    assert answer.json()["success"] is False


@pytest.fixture(scope="module")
def without_database(tmp_path_factory):
    """A production-like gunicorn, its static files collected, whose database does not answer (Redis off)."""
    env = {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{nothing_listens()}/nothing_listens_here",
        "DATABASE_CONNECT_TIMEOUT": "2",
        "STATIC_ROOT": str(tmp_path_factory.mktemp("static")),
    }
    manage(["collectstatic", "--no-input", "-v", "0"], env)
    web = Gunicorn(env, workers=1)
    yield web
    web.stop()


def fetch(url: str, *, cookie: str = "", accept: str = "text/html", data: bytes | None = None):
    request = urllib.request.Request(url, data=data, headers={"Accept": accept, "Cookie": cookie})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


SESSION = "sessionid=" + "x" * 32  # a session cookie: the page must read the session from the database


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/keys/", "/conversation/", "/settings/"])
def test_console_pages_answer_503_while_the_database_is_away(without_database, path):
    status, headers, body = fetch(without_database.url + path, cookie=SESSION)

    assert status == 503
    assert headers["Retry-After"] == "5"
    assert headers["Content-Type"].startswith("text/html")
    assert b"Briefly unavailable" in body


def test_the_thread_updates_answer_json_503_while_the_database_is_away(without_database):
    status, headers, body = fetch(
        without_database.url + "/conversation/updates/?after=msg_" + "A" * 24, cookie=SESSION, accept="application/json"
    )

    assert status == 503
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["code"] == "service_unavailable"


def test_a_log_in_answers_503_while_the_database_is_away(without_database):
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(without_database.url + "/login/", timeout=30) as form:
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.read()).group(1).decode()
    body = f"csrfmiddlewaretoken={token}&username=ada%40example.com&password=x".encode()
    request = urllib.request.Request(
        without_database.url + "/login/", data=body, headers={"Referer": without_database.url + "/login/"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(request, timeout=30)
    assert refused.value.code == 503
