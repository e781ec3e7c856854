"""Rate limits: per API key (INGEST_RATE_LIMIT) and per client address on failed authentication
(AUTH_FAILURE_RATE_LIMIT), with the IETF RateLimit fields and Retry-After."""

import re
import socket
import threading
import uuid
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from redis.connection import AbstractConnection

from conversations.models import Message
from keys import tokens
from keys.models import Generation
from ops.limits import describe_rate, parse_rate
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key
from tests.test_health import closed_port

pytestmark = pytest.mark.django_db

BODY = {"message": "hi"}


def post_from(client, address: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post(CURRENT, data=BODY, content_type="application/json", headers=headers, REMOTE_ADDR=address)


def a_well_formed_unknown_key() -> str:
    return tokens.generate(Generation.V2)


def rate_limit_fields(response) -> tuple[str, int, int, str, int, int]:
    policy = re.fullmatch(r'"([a-z-]+)";q=(\d+);w=(\d+)', response["RateLimit-Policy"])
    current = re.fullmatch(r'"([a-z-]+)";r=(\d+);t=(\d+)', response["RateLimit"])
    assert policy and current, (response["RateLimit-Policy"], response["RateLimit"])
    return (
        policy[1], int(policy[2]), int(policy[3]),
        current[1], int(current[2]), int(current[3]),
    )  # fmt: skip


def test_a_key_gets_its_limit_then_429(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "3/m"
    responses = [post(client, CURRENT, v2[1], BODY) for _ in range(4)]

    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert Message.objects.count() == 3
    refused = responses[-1].json()
    assert refused["success"] is False
    assert refused["code"] == "rate_limited"
    assert "3 requests per minute" in refused["message"]
    assert "combine several messages" in refused["message"]
    assert 1 <= int(responses[-1]["Retry-After"]) <= 60


def test_successful_responses_count_down_the_rate_limit_fields(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "5/m"
    first, second = (post(client, CURRENT, v2[1], BODY) for _ in range(2))

    assert rate_limit_fields(first)[:5] == ("per-key", 5, 60, "per-key", 4)
    assert rate_limit_fields(second)[4] == 3
    assert 0 <= rate_limit_fields(second)[5] <= 60


def test_the_429_carries_the_rate_limit_fields_too(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/h"
    post(client, CURRENT, v2[1], BODY)
    refused = post(client, CURRENT, v2[1], BODY)

    policy, quota, window, _, remaining, reset = rate_limit_fields(refused)
    assert (policy, quota, window, remaining) == ("per-key", 1, 3600, 0)
    assert int(refused["Retry-After"]) == max(1, reset)


def test_each_key_has_its_own_limit(client, user, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    _, other = make_key(user, "another automation")

    assert post(client, CURRENT, v2[1], BODY).status_code == 200
    assert post(client, CURRENT, v2[1], BODY).status_code == 429
    assert post(client, CURRENT, other, BODY).status_code == 200


def test_the_legacy_endpoint_is_limited_too(client, v1, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    assert post(client, LEGACY, v1[1], BODY).status_code == 200
    refused = post(client, LEGACY, v1[1], BODY)
    assert refused.status_code == 429
    assert "Deprecation" in refused


def test_refused_authentication_is_not_counted_against_a_key(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    post(client, CURRENT, None, BODY)
    assert post(client, CURRENT, v2[1], BODY).status_code == 200


def test_failed_authentications_from_one_address_are_limited(client, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "3/m"
    responses = [post(client, CURRENT, a_well_formed_unknown_key(), BODY) for _ in range(4)]

    assert [r.status_code for r in responses] == [401, 401, 401, 429]
    refused = responses[-1]
    assert refused.json()["code"] == "rate_limited"
    assert "failed authentication" in refused.json()["message"]
    assert int(refused["Retry-After"]) >= 1
    assert rate_limit_fields(refused)[:5] == ("auth-failures", 3, 60, "auth-failures", 0)


def test_every_kind_of_failed_authentication_counts(client, v1, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "3/m"
    post(client, CURRENT, None, BODY)  # missing
    post(client, CURRENT, None, BODY, Authorization="Basic abc")  # malformed
    post(client, CURRENT, v1[1], BODY)  # wrong generation
    assert post(client, CURRENT, "psk_nope", BODY).status_code == 429


def test_a_limited_address_gets_429_for_bad_keys_but_a_valid_key_still_works(client, v2, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    for _ in range(2):
        post(client, CURRENT, a_well_formed_unknown_key(), BODY)

    assert post(client, CURRENT, a_well_formed_unknown_key(), BODY).status_code == 429
    assert post(client, CURRENT, "psk_typo", BODY).status_code == 429
    assert post(client, CURRENT, None, BODY).status_code == 429
    assert post(client, CURRENT, v2[1], BODY).status_code == 200  # a key that works is not a failed attempt
    assert post(client, CURRENT, a_well_formed_unknown_key(), BODY).status_code == 429


def test_a_limited_address_s_malformed_keys_still_cost_no_query(client, settings, django_assert_num_queries):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    for _ in range(2):
        post(client, CURRENT, "psk_typo", BODY)

    with django_assert_num_queries(0):
        assert post(client, CURRENT, "psk_typo", BODY).status_code == 429


def test_the_limit_is_per_client_address(client, v2, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    for _ in range(2):
        post_from(client, "203.0.113.9", a_well_formed_unknown_key())

    assert post_from(client, "203.0.113.9", a_well_formed_unknown_key()).status_code == 429
    assert post_from(client, "198.51.100.7", a_well_formed_unknown_key()).status_code == 401


def test_a_forged_forwarded_header_does_not_escape_the_limit(client, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    settings.TRUSTED_PROXY_COUNT = 1
    statuses = [
        post(
            client, CURRENT, a_well_formed_unknown_key(), BODY,
            **{"X-Forwarded-For": f"10.0.0.{n}, 203.0.113.9"},
        ).status_code
        for n in range(3)
    ]  # fmt: skip
    assert statuses == [401, 429, 429]


def test_ipv6_clients_are_counted_per_64(client, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    post_from(client, "2001:db8:1:2::1", a_well_formed_unknown_key())
    post_from(client, "2001:db8:1:2::2", a_well_formed_unknown_key())
    assert post_from(client, "2001:db8:1:2:ffff::9", None).status_code == 429
    assert post_from(client, "2001:db8:1:3::1", None).status_code == 401


def test_successful_requests_do_not_count_as_failures(client, v2, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    for _ in range(3):
        assert post(client, CURRENT, v2[1], BODY).status_code == 200


@pytest.mark.parametrize(
    ("rate", "parsed", "described"),
    [
        ("60/m", (60, 60), "60 requests per minute"),
        ("1000/h", (1000, 3600), "1000 requests per hour"),
        ("1/s", (1, 1), "1 request per second"),
        ("10/30s", (10, 30), "10 requests every 30 seconds"),
        ("5000/d", (5000, 86400), "5000 requests per day"),
    ],
)
def test_rates_are_read_and_described(rate, parsed, described):
    assert parse_rate(rate) == parsed
    assert describe_rate(rate) == described


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="counts Redis round trips; set REDIS_URL")
def test_an_accepted_request_costs_one_redis_round_trip(client, v2, monkeypatch):
    """Budget (docs/design.md#the-request-path-budget: the rate limit in at most two round trips): one Lua call
    counts the hit and gives a new window its expiry. A valid key does not read the failed-authentication marker."""
    # Connections made first (the tests run in random order: this one may be the process's first to use Redis, and
    # a new connection's handshake is not the request's cost), by another key, so v2's window still starts below.
    post(client, CURRENT, make_key(v2[0].owner, "warm-up")[1], BODY)
    commands: list[str] = []
    original = AbstractConnection.send_command

    def counting(self, *args, **options):
        commands.append(str(args[0]))
        return original(self, *args, **options)

    # Every command reaches Redis through a connection's send_command, from a pooled client or not.
    monkeypatch.setattr(AbstractConnection, "send_command", counting)
    for _ in range(2):  # the window's first hit, then a later one
        post(client, CURRENT, v2[1], BODY)

    assert commands == ["EVAL", "EVAL"]


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="reads the counter's expiry in Redis; set REDIS_URL")
def test_a_window_counter_expires_after_its_window(v2, settings):
    from django.core.cache import cache

    from ingestion.throttling import count_key_request

    settings.INGEST_RATE_LIMIT = "10/m"
    usage, over = count_key_request(v2[0])
    client = cache._cache.get_client()
    (counter,) = [k for k in client.keys("*") if b"per-key" in k]

    assert (usage.remaining, over) == (9, False)
    assert 60 < client.ttl(counter) <= 65  # the window plus a margin, set by the first hit itself
    assert 1 <= usage.reset <= 60


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="counts on Redis connections; set REDIS_URL")
def test_each_thread_counts_on_a_connection_of_its_own(v2):
    from django.core.cache import cache

    from ingestion.throttling import count_key_request

    counting = cache._cache  # the cache's client, which holds the counting connections
    count_key_request(v2[0])
    mine = counting._counting_connection()
    seen_by_other_thread = []
    other = threading.Thread(target=lambda: seen_by_other_thread.append(counting._counting_connection()))
    other.start()
    other.join()

    assert counting._counting_connection() is mine  # kept: no checkout, no connect per request
    assert seen_by_other_thread[0] is not mine  # a connection never carries two requests' commands at once


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="drops a Redis connection; needs REDIS_URL")
def test_the_count_goes_on_after_redis_drops_the_connection(v2, settings):
    from django.core.cache import cache

    from ingestion.throttling import count_key_request

    settings.INGEST_RATE_LIMIT = "10/m"
    first, _ = count_key_request(v2[0])
    # What a Redis restart or an idle timeout does to it; only this connection, never anyone else's on the server.
    counting = cache._cache._counting_connection()
    counting.send_command("CLIENT", "ID")
    own_id = int(counting.read_response())
    assert redis.Redis.from_url(django_settings.REDIS_URL).client_kill_filter(_id=str(own_id)) == 1
    second, over = count_key_request(v2[0])

    assert (first.remaining, second.remaining, over) == (9, 8, False)
    assert cache._cache._counting_connection()._sock is not None  # reconnected


def test_an_unreachable_redis_refuses_the_message_with_503_and_records_nothing(client, v2, settings):
    """The per-key count's own connection (ingestion/hotpath/cache.py) fails like the pooled client: a JSON 503, no
    500."""
    settings.CACHES = {
        "default": {
            "BACKEND": "ingestion.hotpath.cache.AtomicIncrRedisCache",
            "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }

    response = post(client, CURRENT, v2[1], BODY)

    assert (response.status_code, response.json()["code"]) == (503, "service_unavailable")
    assert Message.objects.count() == 0


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="counts on Redis connections; set REDIS_URL")
def test_a_count_whose_answer_was_not_read_yet_is_read_before_the_next_command():
    """The ordinary request sends its count and reads the answer later (ingestion/views.py): an answer left on the
    socket must never be taken for the next command's."""
    from ops.limits import start_count_in_window

    counter = f"test-unread:{uuid.uuid4().hex}"
    first = start_count_in_window(counter, 60)
    second = start_count_in_window(counter, 60)  # sent while the first's answer still waits on the socket

    assert (second(), first(), first()) == (2, 1, 1)  # each its own answer; read once, kept


class _ForgetfulRedis(threading.Thread):
    """A Redis stand-in on 127.0.0.1 that answers HELLO as Redis 7 does and other commands with +OK, but closes its
    first connection when an EVAL arrives, without answering (a Redis restarted while the count's answer was on its
    way), and answers the EVALs of later connections with :7."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.evals_seen = 0

    def run(self) -> None:
        with self.listener:
            for served in range(2):
                connection, _ = self.listener.accept()
                with connection, connection.makefile("rb") as commands:
                    self.answer(connection, commands, forget_the_count=served == 0)

    def answer(self, connection: socket.socket, commands: Any, *, forget_the_count: bool) -> None:
        while (command := self.read_command(commands)) is not None:
            if command[0].upper() == b"HELLO":  # redis-py asks for RESP3: a map that says so
                connection.sendall(b"%1\r\n$5\r\nproto\r\n:3\r\n")
            elif command[0].upper() == b"EVAL":
                self.evals_seen += 1
                if forget_the_count:
                    return  # closed, the count unanswered
                connection.sendall(b":7\r\n")
            else:
                connection.sendall(b"+OK\r\n")

    @staticmethod
    def read_command(stream: Any) -> list[bytes] | None:
        header = stream.readline()
        if not header.startswith(b"*"):
            return None
        parts = []
        for _ in range(int(header[1:])):
            length = int(stream.readline()[1:])
            parts.append(stream.read(length + 2)[:-2])
        return parts


def test_a_count_whose_answer_is_lost_is_counted_again_on_a_fresh_connection():
    from ingestion.hotpath.cache import AtomicIncrRedisCache

    server = _ForgetfulRedis()
    server.start()
    cache = AtomicIncrRedisCache(f"redis://127.0.0.1:{server.port}/0", {"OPTIONS": {"socket_timeout": 5}})

    answer = cache.start_count_in_window("lost", 60)

    assert answer() == 7  # read from the second connection
    assert server.evals_seen == 2  # counted twice: towards the limit, never past it
