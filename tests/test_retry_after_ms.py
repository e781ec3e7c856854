"""429 answers carry the wait in the body as retryAfterMs besides the Retry-After header (issue 18 item 7): the
official poke.mcp helper reads the body's value, not the header."""

import time

import pytest
from poke.mcp import _send_callback_sync

from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


def test_the_per_key_limit_says_it_in_both(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    post(client, CURRENT, v2[1], {"message": "one"})

    limited = post(client, CURRENT, v2[1], {"message": "two"})

    assert limited.status_code == 429
    assert limited.json()["retryAfterMs"] == int(limited["Retry-After"]) * 1000 > 0


def test_the_failed_authentication_limit_says_it_in_both(client, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    post(client, CURRENT, "psk_wrong", {"message": "x"})

    limited = post(client, CURRENT, "psk_wrong", {"message": "x"})

    assert limited.status_code == 429
    assert limited.json()["retryAfterMs"] == int(limited["Retry-After"]) * 1000 > 0


def test_other_errors_do_not_carry_it(client, v2):
    assert "retryAfterMs" not in post(client, CURRENT, v2[1], {"message": 1}).json()


@pytest.mark.django_db(transaction=True)
def test_the_official_helper_reads_our_wait(live_server, settings):
    from tests.factories import make_key

    settings.INGEST_RATE_LIMIT = "1/h"
    made, key = make_key()
    url = live_server.url + CURRENT
    assert "nextToken" not in _send_callback_sync(url=url, token=key, content="first", has_more=False)

    before = int(time.time())
    limited = _send_callback_sync(url=url, token=key, content="second", has_more=False)
    after = int(time.time())

    # Ours is the rest of the key's hour-long window (windows are staggered by the key's id), which the helper must
    # pass on as it is rather than its own 60 000 ms fallback.
    def rest_of_window(now: int) -> int:
        return 3600 - (now - made.pk) % 3600

    expected = {rest_of_window(now) * 1000 for now in range(before, after + 1)}
    assert limited["_retry"] is True
    assert limited["retryAfterMs"] in expected
    if 60_000 not in expected:
        assert limited["retryAfterMs"] != 60_000
