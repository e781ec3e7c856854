"""A password reset link requested without its trailing slash (issue 18 item 11): Django redirects it (301, to add
the slash), and that request's path holds the token too. No log line may keep it."""

import json
import logging

import pytest

from ops.redaction import RESET_LINK_ROUTE, RedactResetLinks, is_reset_link, loggable_path

pytestmark = pytest.mark.django_db

TOKEN = "cz7x8w-0a1b2c3d4e5f6a7b8c9d"
WITHOUT_SLASH = f"/reset/NQ/{TOKEN}"


def test_the_redirected_request_is_logged_without_its_token(client, caplog):
    caplog.set_level(logging.INFO)
    response = client.get(WITHOUT_SLASH)

    assert response.status_code == 301  # the redirect carries the link back to the browser only
    [access] = [record for record in caplog.records if record.name == "access"]
    assert access.fields["path"] == RESET_LINK_ROUTE
    for record in caplog.records:  # the message and every field a JSON line is made of
        assert TOKEN not in json.dumps(vars(record), default=str)


@pytest.mark.parametrize("path", [WITHOUT_SLASH, WITHOUT_SLASH + "/"])
def test_either_form_is_a_reset_link(path):
    assert is_reset_link(path)
    assert loggable_path(path) == RESET_LINK_ROUTE


@pytest.mark.parametrize("path", ["/reset/NQ/set-password", "/reset/NQ/set-password/", "/reset/done/", "/keys/"])
def test_other_paths_are_kept(path):
    assert loggable_path(path) == path


def test_a_log_line_naming_the_link_without_slash_is_redacted():
    record = logging.LogRecord(
        "gunicorn.error", logging.ERROR, __file__, 1, "Error handling request %s", (WITHOUT_SLASH,), None
    )
    assert RedactResetLinks().filter(record)
    assert TOKEN not in record.getMessage()
    assert RESET_LINK_ROUTE in record.getMessage()
