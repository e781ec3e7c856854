"""Repeated slashes in API paths (issue 18 item 2): the npm SDK joins POKE_API and the path as they are, so a base URL
ending in a slash sends POST /api/v1//inbound/api-message. The API takes it as /api/v1/inbound/api-message, in place
(no redirect, which a client need not follow with its POST); nothing else changes."""

import json
import subprocess

import pytest

from conversations.models import Message
from tests.clients import NODE, POKE_CLI, require_cli
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/v1//inbound/api-message", "/api//v1///inbound/api-message"])
def test_a_message_path_with_repeated_slashes_is_the_message_path(client, v2, path):
    response = post(client, path, v2[1], {"message": "hi"})

    assert response.status_code == 200
    assert Message.objects.get(public_id=response.json()["id"]).text == "hi"


def test_the_receipt_path_too(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    receipt = client.get(f"/api/v1/inbound//messages/{message_id}", headers={"Authorization": f"Bearer {v2[1]}"})
    assert receipt.status_code == 200


def test_everything_else_is_unchanged(client, v2):
    # Authentication still applies, unknown paths are still 404, and the console's paths stay exact.
    assert post(client, "/api/v1//inbound/api-message", "psk_wrong", {"message": "hi"}).status_code == 401
    assert post(client, "/api/v1//nothing/here", v2[1], {"message": "hi"}).status_code == 404
    client.force_login(v2[0].owner)
    assert client.get("/settings//advanced/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_npm_sdk_with_a_trailing_slash_in_poke_api_sends(live_server, v2):
    require_cli()
    sdk = POKE_CLI.parent / "index.cjs"
    script = (
        f"const {{ Poke }} = require({json.dumps(str(sdk))});"
        "new Poke().sendMessage('from node').then(r => console.log(JSON.stringify(r)),"
        " e => { console.error(e.message); process.exit(1); });"
    )
    env = {"POKE_API": live_server.url + "/api/v1/", "POKE_API_KEY": v2[1], "PATH": "/usr/bin:/bin"}
    done = subprocess.run([NODE, "-e", script], env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)
    assert sent["success"] is True
    assert Message.objects.get(public_id=sent["id"]).text == "from node"
