"""Tokens are redacted by their shape wherever they appear in a path (issue 26 item 9): a device code or a reset
link on a path that does not route (another API version, an extra segment) reached the access log in clear, since
only the exact routes were rewritten."""

import json
import logging

import pytest

from keys import tokens
from ops.redaction import RedactResetLinks, loggable_path, redact_text

pytestmark = pytest.mark.django_db

DEVICE_CODE = tokens.generate_checked("pdc_")
RESET_TOKEN = "cz7x8w-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"
KEY = "psk_" + "A" * 38

PATHS = [
    f"/api/v2/cli-auth/poll/{DEVICE_CODE}",
    f"/api/v1/cli-auth/poll/{DEVICE_CODE}/extra",
    f"/api/v1/cli-auth/poll//{DEVICE_CODE}",
    f"/api/v1/cli-auth/poll/{DEVICE_CODE.replace('_', '%5F')}",
    f"/reset/NQ/{RESET_TOKEN}/extra/",
    f"/en/reset/NQ/{RESET_TOKEN}/",
    f"/anything/{KEY}",
    f"/api/v1/inbound/webhook/pwh_{'b' * 38}",
]
# Test ids without the random code: pytest-xdist's workers each import this module and must name the tests alike.
PATH_IDS = [path.replace(DEVICE_CODE[4:], "<random>") for path in PATHS]


@pytest.mark.parametrize("path", PATHS, ids=PATH_IDS)
def test_a_token_shaped_segment_never_reaches_the_access_log(client, caplog, path):
    caplog.set_level(logging.INFO)
    client.get(path)

    [access] = [record for record in caplog.records if record.name == "access"]
    assert access.fields["path"] != path
    for record in caplog.records:
        assert not _holds_a_secret(json.dumps(vars(record), default=str))


def _holds_a_secret(text: str) -> bool:
    return any(secret in text for secret in (DEVICE_CODE[4:], RESET_TOKEN, KEY[4:], "b" * 38))


@pytest.mark.parametrize("path", PATHS, ids=PATH_IDS)
def test_log_lines_and_paths_lose_the_token(path):
    assert _holds_a_secret(path)
    assert not _holds_a_secret(loggable_path(path))
    record = logging.LogRecord("gunicorn.error", logging.ERROR, __file__, 1, "Error handling request %s", (path,), None)
    assert RedactResetLinks().filter(record)
    assert not _holds_a_secret(record.getMessage())
    assert not _holds_a_secret(redact_text(f'"GET {path}?x=1 HTTP/1.1" 404'))


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/mcp/connections/mcp_abcdefghijklmnopqrst",  # ids are not secrets
        "/conversation/messages/msg_0123456789abcdefghij/",
        "/api/v1/inbound/webhook/trg_0123456789abcdefghij",
        "/reset/NQ/set-password/",
        "/static/css/console.3f2a1b.css",
        "/api/v1/receipts/72d3162e-cc78-11e3-81ab-4c9367dc0958",
    ],
)
def test_ids_and_ordinary_paths_are_kept(path):
    assert loggable_path(path) == path
