"""Two gunicorn processes over one PostgreSQL and one Redis (docs/design.md#growing-past-one-machine): no message lost
or doubled, one message per Idempotency-Key, a rate limit that holds across both, and revocation seen by both.

Runs wherever PostgreSQL and Redis are reachable (always in CI), against a database of its own."""

import contextlib
import http.client
import json
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle

import psycopg
import pytest

from tests.live_stack import Answer, Gunicorn, private_database, redis_url, require_postgres_and_redis, run_python, send

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack")]  # see tests/live_stack.py

CURRENT = "/api/v1/inbound/api-message"
N = 520  # concurrent requests, spread over both processes
KEYS = 26  # N / KEYS = 20 requests per key, under the limit below
RATE_LIMIT = 25  # per key per hour: a window far longer than the test, so no reset falls inside it
CLIENT_THREADS = 24
BEFORE_AND_AFTER = 8  # a revoked key's requests, before and after: more than a process has workers

SETUP = """
import json
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from keys.services import create_key
owner = get_user_model().objects.create_user("owner", "owner@example.com", "pw")
keys = [create_key(owner, f"automation {n}") for n in range(%d)]
staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
session = SessionStore()
session[SESSION_KEY] = str(staff.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = staff.get_session_auth_hash()
session.create()
print(json.dumps({"keys": [[key.pk, plaintext] for key, plaintext in keys], "session": session.session_key}))
"""


@pytest.fixture(scope="module")
def stack():
    require_postgres_and_redis()
    with private_database("twoproc") as database_url:
        env = {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url(),
            "CACHE_KEY_PREFIX": f"limits-twoproc-{uuid.uuid4().hex}",  # counters of this run only
            "TASK_BACKEND": "database",  # production's hand-off: the queued delivery commits with the message
            "INGEST_RATE_LIMIT": f"{RATE_LIMIT}/h",
            "AUTH_FAILURE_RATE_LIMIT": "1000/m",
            "MAX_ACTIVE_KEYS_PER_ACCOUNT": str(KEYS + 3),  # one account holds every key of the test
        }
        made = run_python(SETUP % (KEYS + 3), env)
        servers = [Gunicorn(env), Gunicorn(env)]
        try:
            with psycopg.connect(database_url, autocommit=True) as db:
                yield servers, made["keys"], made["session"], db
        finally:
            for server in servers:
                server.stop()


def user_messages(db, key_id: int) -> int:
    row = db.execute(
        "SELECT count(*) FROM conversations_message m JOIN conversations_delivery d ON d.message_id = m.id "
        "WHERE m.api_key_id = %s AND m.role = 'user'",
        [key_id],
    ).fetchone()
    return row[0]


def fire(jobs) -> list[Answer]:
    """Send every (server, key, body, headers) job at once from a bounded pool of client threads."""
    first_wave = min(CLIENT_THREADS, len(jobs))
    start = threading.Barrier(first_wave)  # the first wave leaves together; the rest follow as threads free up

    def one(numbered_job):
        number, (server, key, body, headers) = numbered_job
        if number < first_wave:
            with contextlib.suppress(threading.BrokenBarrierError):
                start.wait(timeout=10)
        return send(server.url, CURRENT, key, body, headers)

    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        return list(pool.map(one, enumerate(jobs)))


def test_concurrent_requests_over_both_processes_record_exactly_one_message_each(stack):
    servers, keys, _, db = stack
    automation_keys = keys[:KEYS]
    jobs = [
        (server, plaintext, {"message": f"run {n}", "n": n}, {})
        for n, (server, (_, plaintext)) in enumerate(zip(cycle(servers), automation_keys * (N // KEYS), strict=False))
    ]
    assert len(jobs) == N

    answers = fire(jobs)

    assert Counter(answer.status for answer in answers) == {200: N}
    assert len({answer.body["id"] for answer in answers}) == N
    assert sum(user_messages(db, key_id) for key_id, _ in automation_keys) == N
    (queued,) = db.execute("SELECT count(*) FROM conversations_delivery WHERE status = 'queued'").fetchone()
    assert queued >= N  # every message's hand-off committed with it (the delivery row is the queue's entry)


def test_the_same_idempotency_key_sent_to_both_at_once_records_one_message(stack):
    servers, keys, _, db = stack
    key_id, plaintext = keys[KEYS]
    idempotency_key = secrets.token_hex(8)
    same = {"Idempotency-Key": idempotency_key}
    jobs = [(server, plaintext, {"message": "charge once"}, same) for server in servers] * 6

    answers = fire(jobs)

    # A request sent while the first is in flight waits for it and gets its response (docs/reference/api.md).
    assert {answer.status for answer in answers} == {200}, [answer.body for answer in answers]
    assert len([answer for answer in answers if "Idempotent-Replayed" not in answer.headers]) == 1
    assert len({answer.body["id"] for answer in answers}) == 1
    assert user_messages(db, key_id) == 1


def test_a_keys_rate_limit_holds_across_both_processes(stack):
    servers, keys, _, db = stack
    key_id, plaintext = keys[KEYS + 1]
    jobs = [(server, plaintext, {"message": "flood"}, {}) for server in servers] * 20

    answers = fire(jobs)

    assert Counter(answer.status for answer in answers) == {200: RATE_LIMIT, 429: 40 - RATE_LIMIT}
    assert {answer.body["code"] for answer in answers if answer.status == 429} == {"rate_limited"}
    assert user_messages(db, key_id) == RATE_LIMIT


def test_a_key_revoked_through_one_process_is_refused_by_the_other(stack):
    (one, other), keys, session, db = stack
    key_id, plaintext = keys[KEYS + 2]
    # Several requests, each on a new connection, so that the key is remembered by each of the other's workers
    # (ingestion/hotpath/recent.py): the revocation must get past what they remember.
    before = [send(other.url, CURRENT, plaintext, {"message": f"before {n}"}).status for n in range(BEFORE_AND_AFTER)]
    assert before == [200] * BEFORE_AND_AFTER

    csrf = secrets.token_hex(16)  # 32 characters: a valid CSRF secret, sent as cookie and form field alike
    revoke = urllib_post_form(
        f"{one.url}/admin/keys/apikey/",
        {"action": "revoke_selected", "_selected_action": str(key_id), "csrfmiddlewaretoken": csrf},
        cookies={"sessionid": session, "csrftoken": csrf},
    )
    assert revoke == 302  # the admin redirects back to the list after its action

    refused = [send(other.url, CURRENT, plaintext, {"message": f"after {n}"}) for n in range(BEFORE_AND_AFTER)]
    assert [(r.status, r.body["code"]) for r in refused] == [(401, "revoked_api_key")] * BEFORE_AND_AFTER
    assert user_messages(db, key_id) == BEFORE_AND_AFTER


def urllib_post_form(url: str, fields: dict[str, str], cookies: dict[str, str]) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(fields).encode(),
        headers={"Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())},
    )
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def raw_request(server, headers: list[tuple[str, str]], body_chunks: list[bytes] | None = None) -> tuple[int, dict]:
    """A request written header by header, as curl or a hostile client could: repeated headers, chunked bodies."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest("POST", CURRENT)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        for chunk in body_chunks or []:
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if body_chunks is not None:
            connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_gunicorn_refuses_a_chunked_body_with_411(stack):
    servers, keys, _, _ = stack
    status, body = raw_request(
        servers[0],
        [("Authorization", f"Bearer {keys[0][1]}"), ("Content-Type", "application/json"),
         ("Transfer-Encoding", "chunked")],
        [b'{"message":', b' "hi"}'],
    )  # fmt: skip
    assert (status, body["code"]) == (411, "length_required")


def test_gunicorn_refuses_a_repeated_authorization_header(stack):
    servers, keys, _, _ = stack
    status, body = raw_request(
        servers[1],
        [("Authorization", f"Bearer {keys[0][1]}"), ("Authorization", f"Bearer {keys[1][1]}"),
         ("Content-Type", "application/json"), ("Content-Length", "0")],
        None,
    )  # fmt: skip
    assert status in {400, 401}  # gunicorn may refuse the duplicate itself; if it passes it on, we refuse the key
    assert body["success"] is False
