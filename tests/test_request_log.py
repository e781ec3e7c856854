"""One JSON line per request, with what an operator needs and nothing secret; tracebacks to the log only."""

import json
import logging
import time

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from config import errors
from ops.jsonlog import JsonFormatter
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("the disk is on fire")


# This module doubles as the URLconf of the tests that need a view that fails.
urlpatterns = [path("api/v1/boom", boom), path("boom", boom)]
handler500 = errors.server_error


def lines(caplog, logger: str = "access") -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(record)) for record in caplog.records if record.name == logger]


@pytest.fixture(autouse=True)
def _capture(caplog):
    caplog.set_level(logging.INFO)


def test_an_accepted_request_is_one_line_with_who_what_and_how_long(client, caplog, v2):
    key, plaintext = v2
    started = time.monotonic()
    response = post(client, CURRENT, plaintext, {"message": "Remind me at 3pm"}, **{"X-Request-ID": "trace-42"})
    took_ms = (time.monotonic() - started) * 1000

    [line] = lines(caplog)
    assert line["request_id"] == "trace-42" == response["X-Request-ID"]
    assert line["logger"] == "access"
    assert line["method"] == "POST"
    assert line["path"] == CURRENT
    assert line["endpoint"] == "api_message"
    assert line["status"] == 200
    assert line["code"] is None
    assert line["key_id"] == key.pk
    assert line["key_hint"] == key.hint
    assert line["user_id"] == key.owner_id
    assert line["bytes_in"] == len(json.dumps({"message": "Remind me at 3pm"}))
    assert line["bytes_out"] == len(response.content)
    # Within what the test itself saw, not under a fixed figure: a process's first request loads the URLs and views
    # (7.7 s once at load 15), and this test may run first.
    assert 0 < line["latency_ms"] <= took_ms
    assert line["time"].endswith("+00:00")


def test_the_line_never_holds_the_key_its_digest_or_the_header(client, caplog, v2):
    key, plaintext = v2
    post(client, CURRENT, plaintext, {"message": "hi"})
    post(client, CURRENT, plaintext[:-1] + "x", {"message": "hi"})  # a typo: refused

    text = "\n".join(json.dumps(line) for line in lines(caplog))
    assert plaintext not in text
    assert plaintext[:-1] not in text
    assert key.digest not in text
    assert "Bearer" not in text


def test_a_refused_request_is_logged_with_its_code_and_no_key(client, caplog):
    post(client, CURRENT, "psk_notakey", {"message": "hi"})

    [line] = lines(caplog)
    assert line["status"] == 401
    assert line["code"] == "invalid_api_key"
    assert line["key_id"] is None
    assert line["user_id"] is None


def test_unknown_api_paths_are_logged_too(client, caplog):
    client.get("/api/v2/nothing-here")

    [line] = lines(caplog)
    assert line["status"] == 404
    assert line["endpoint"] == "ingestion.views.api_not_found"


def test_pages_outside_the_api_are_logged_alike(client, caplog):
    client.get("/admin/login/", headers={"User-Agent": "Mozilla/5.0 (X11)"})

    [line] = lines(caplog)
    assert (line["method"], line["path"], line["status"]) == ("GET", "/admin/login/", 200)
    assert (line["endpoint"], line["key_id"], line["user_agent"]) == ("admin:login", None, "Mozilla/5.0 (X11)")


def test_the_line_names_the_client_address_the_limits_count(client, caplog, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    client.get("/", headers={"X-Forwarded-For": "198.51.100.7, 203.0.113.9"})

    [line] = lines(caplog)
    assert line["client_ip"] == "203.0.113.9"  # what the router appended, not what the client wrote


def test_refused_requests_do_not_add_a_second_line_from_django(client, caplog):
    post(client, CURRENT, "psk_notakey", {"message": "hi"})
    assert [record.name for record in caplog.records if record.levelno >= logging.WARNING] == []


@pytest.mark.urls(__name__)
def test_a_crash_sends_its_traceback_to_the_log_and_a_plain_json_error_to_the_client(caplog):
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/boom")

    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"
    # A crash may come after a message was committed: the answer never claims that nothing was recorded.
    assert "nothing was recorded" not in response.json()["message"]
    assert "Idempotency-Key" in response.json()["message"]
    assert "fire" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    [error] = lines(caplog, "django.request")
    assert error["level"] == "error"
    assert error["request_id"] == response["X-Request-ID"]
    assert "RuntimeError: the disk is on fire" in error["traceback"]
    [access] = lines(caplog)
    assert access["status"] == 500


@pytest.mark.urls(__name__)
def test_a_crash_outside_the_api_shows_no_traceback_either(caplog):
    response = Client(raise_request_exception=False).get("/boom")

    assert response.status_code == 500
    assert "fire" not in response.content.decode()
    assert "the disk is on fire" in lines(caplog, "django.request")[0]["traceback"]
