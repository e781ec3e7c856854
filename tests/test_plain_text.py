"""A text/plain body on POST /api/v1/inbound/api-message is the message (docs/reference/api.md#send-a-message):
``curl -d "Backup finished" -H 'Content-Type: text/plain'``. JSON stays what the official clients send; a form body
(curl -d's default) is refused with a hint."""

import pytest

from conversations.models import Message, Role
from tests.conftest import CURRENT, LEGACY, post

pytestmark = pytest.mark.django_db


def send_text(client, key: str, raw: bytes | str, content_type: str = "text/plain", path: str = CURRENT):
    return post(client, path, key, raw=raw, content_type=content_type)


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain; charset=utf-8", "Text/Plain;charset=US-ASCII"])
def test_a_text_body_is_the_message(client, v2, content_type):
    response = send_text(client, v2[1], "Backup finished", content_type)

    assert response.status_code == 200, response.content
    assert response.json()["success"] is True
    message = Message.objects.get(public_id=response.json()["id"], role=Role.USER)
    assert message.text == "Backup finished"
    assert message.context == {"message": "Backup finished"}  # what the JSON body would have forwarded


def test_a_final_line_break_is_not_part_of_the_message(client, v2):
    response = send_text(client, v2[1], b"Backup finished on db-1\nin 4 minutes\r\n")

    assert response.status_code == 200
    assert Message.objects.get(public_id=response.json()["id"]).text == "Backup finished on db-1\nin 4 minutes"


def test_a_byte_order_mark_is_not_part_of_the_message(client, v2):
    response = send_text(client, v2[1], b"\xef\xbb\xbfBackup finished\r\n")

    assert response.status_code == 200
    assert Message.objects.get(public_id=response.json()["id"]).text == "Backup finished"


def test_unicode_text_is_kept(client, v2):
    response = send_text(client, v2[1], "Sauvegarde terminée ✓".encode(), "text/plain; charset=utf-8")

    assert Message.objects.get(public_id=response.json()["id"]).text == "Sauvegarde terminée ✓"


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        (b"   \n", "text/plain", 400, "invalid_body"),
        (b"\xef\xbb\xbf\r\n", "text/plain", 400, "invalid_body"),  # an empty file saved with a byte order mark
        (b"", "text/plain", 400, "invalid_json"),  # no body at all: as for JSON
        (b"caf\xe9", "text/plain", 400, "invalid_body"),
        (b"bad\x00byte", "text/plain", 400, "invalid_body"),
        (b"hello", "text/plain; charset=latin-1", 415, "unsupported_media_type"),
    ],
)
def test_a_bad_text_body_gets_a_clear_error_and_records_nothing(client, v2, raw, content_type, status, code):
    response = send_text(client, v2[1], raw, content_type)

    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert response.json()["success"] is False
    assert not Message.objects.exists()


def test_a_text_body_over_the_limit_is_refused_as_json_is(client, v2, settings):
    settings.INGEST_MAX_BODY_BYTES = 100

    as_text = send_text(client, v2[1], "x" * 101)
    as_json = post(client, CURRENT, v2[1], {"message": "x" * 90})

    assert as_text.status_code == as_json.status_code == 413
    assert as_text.json()["code"] == as_json.json()["code"] == "payload_too_large"
    assert not Message.objects.exists()


def test_curls_default_form_body_is_refused_with_what_to_send(client, v2):
    response = send_text(client, v2[1], "Backup finished", "application/x-www-form-urlencoded")

    assert response.status_code == 415
    body = response.json()
    assert body["code"] == "unsupported_media_type"
    assert "Content-Type: text/plain" in body["message"] and "curl -d" in body["message"]
    assert not Message.objects.exists()


def test_the_text_body_needs_a_valid_key_like_any_other(client, v2):
    response = send_text(client, "not-a-key", "Backup finished")

    assert response.status_code == 401
    assert not Message.objects.exists()


def test_the_legacy_endpoint_stays_json_only(client, v1):
    response = send_text(client, v1[1], "Backup finished", path=LEGACY)

    assert response.status_code == 415
    assert "application/json" in response.json()["message"]
    assert "Content-Type: text/plain" not in response.json()["message"]
