"""Smaller contract points from the attacker's review (issue 18 item 18)."""

import gzip

import pytest
from django.test import Client

from conversations.models import Message
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db

RECEIPTS = "/api/v1/inbound/messages/"


@pytest.mark.parametrize("content_type", ["*/*", "application/*", "*/json", "text/json"])
def test_only_application_json_is_json(client, v2, content_type):
    response = post(client, CURRENT, v2[1], {"message": "hi"}, content_type=content_type)
    assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")
    assert not Message.objects.exists()


def test_application_json_with_a_utf8_charset_still_is(client, v2):
    assert (
        post(client, CURRENT, v2[1], {"message": "hi"}, content_type="application/json; charset=utf-8").status_code
        == 200
    )


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_compressed_body_is_refused_as_such(client, v2, coding):
    response = client.post(
        CURRENT,
        data=gzip.compress(b'{"message": "hi"}'),
        content_type="application/json",
        headers={"Authorization": f"Bearer {v2[1]}", "Content-Encoding": coding},
    )
    assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")
    assert "Content-Encoding" in response.json()["message"]


def test_identity_coding_is_fine(client, v2):
    assert post(client, CURRENT, v2[1], {"message": "hi"}, **{"Content-Encoding": "identity"}).status_code == 200


def test_two_idempotency_keys_joined_by_the_server_are_refused(client, v2):
    # Two Idempotency-Key headers reach Django as one value joined by a comma.
    response = post(client, CURRENT, v2[1], {"message": "hi"}, **{"Idempotency-Key": "first,second"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_idempotency_key")
    assert "one Idempotency-Key" in response.json()["message"]
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("value", "named"), [({}, "an object"), ([], "an array"), (1, "a number"), (True, "a boolean")]
)
def test_a_message_of_the_wrong_type_is_named_for_what_it_is(client, v2, value, named):
    response = post(client, CURRENT, v2[1], {"message": value})
    assert response.status_code == 400
    assert f"not {named}" in response.json()["message"]


def test_a_very_long_number_is_explained_without_python_advice(client, v2):
    response = post(client, CURRENT, v2[1], raw='{"message": "hi", "n": ' + "1" * 4301 + "}")
    assert response.status_code == 400
    assert "sys.set_int_max_str_digits" not in response.json()["message"]
    assert "4300 digits" in response.json()["message"]


def test_json_errors_do_not_stutter(client, v2):
    message = post(client, CURRENT, v2[1], raw='{"message": "unterminated').json()["message"]
    assert "at at" not in message
    assert message.endswith("line 1, column 13.")


def test_receipt_reads_do_not_count_against_sending(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "2/m"
    message_id = post(client, CURRENT, v2[1], {"message": "one"}).json()["id"]
    for _ in range(5):
        read = client.get(RECEIPTS + message_id, headers={"Authorization": f"Bearer {v2[1]}"})
        assert read.status_code == 200
        assert read["RateLimit-Policy"].startswith('"per-key-reads"')

    assert post(client, CURRENT, v2[1], {"message": "two"}).status_code == 200  # the second of two sends


def test_receipt_reads_have_their_own_limit(client, v2, settings):
    settings.RECEIPT_RATE_LIMIT = "2/m"
    message_id = post(client, CURRENT, v2[1], {"message": "one"}).json()["id"]
    codes = [client.get(RECEIPTS + message_id, headers={"Authorization": f"Bearer {v2[1]}"}) for _ in range(3)]
    assert [c.status_code for c in codes] == [200, 200, 429]
    assert codes[-1].json()["retryAfterMs"] > 0


def test_a_conflict_and_an_outage_say_when_to_retry(client, v2):
    from ingestion.exceptions import IdempotencyInProgress, ServiceUnavailable, api_exception_handler

    for error in (IdempotencyInProgress(), ServiceUnavailable()):
        response = api_exception_handler(error, {"view": None})
        assert int(response["Retry-After"]) >= 1


def test_plain_http_to_the_api_is_redirected_in_json(settings, v2):
    settings.SECURE_SSL_REDIRECT = True
    response = Client().post(CURRENT, data=b'{"message": "hi"}', content_type="application/json")
    assert response.status_code == 301
    assert response["Location"] == "https://testserver" + CURRENT
    assert response["Content-Type"] == "application/json"
    assert "https://testserver" + CURRENT in response.json()["message"]
