"""The snippets shown with a new key work as pasted, against a live server."""

import os
import shutil
import subprocess
import sys

import pytest

from console.examples import for_new_key
from conversations.models import Message
from keys.models import Generation
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db(transaction=True)


def run(command: list[str], **env: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, env={**os.environ, **env}, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def example(examples, slug: str) -> str:
    return next(item.code for item in examples if item.slug == slug)


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_curl_example_sends_a_message(live_server):
    _, plaintext = make_key(UserFactory(), "shell")
    code = example(for_new_key(live_server.url, plaintext, Generation.V2), "curl")

    output = run(["bash", "-c", code])

    assert '"success":true' in output.replace(" ", "")
    assert Message.objects.get(role="user").text == "Remind me to stretch at 3pm"


def test_the_python_example_sends_a_message_with_the_poke_sdk(live_server):
    _, plaintext = make_key(UserFactory(), "python")
    code = example(for_new_key(live_server.url, plaintext, Generation.V2), "python")

    # The snippet's comment says which variable to export; do exactly that. POKE_API is not set (and a decoy where
    # the SDK would find it): the snippet itself names this server, so the key goes nowhere else.
    assert "POKE_API=" not in code and f'base_url="{live_server.url}/api/v1"' in code
    output = run([sys.executable, "-c", code], POKE_API="http://127.0.0.1:9/api/v1", POKE_API_KEY=plaintext)

    assert "Message sent successfully" in output
    assert Message.objects.get(role="user").text == "Remind me to review the pull requests at 4pm"


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_github_actions_step_runs_its_script_with_the_secret_from_the_environment(live_server):
    _, plaintext = make_key(UserFactory(), "ci")
    step = example(for_new_key(live_server.url, plaintext, Generation.V2), "github-actions")
    assert plaintext not in step
    script = step.split("run: |\n", 1)[1]
    script = "\n".join(line.removeprefix("    ") for line in script.splitlines())

    run(["bash", "-c", script], POKE_API_KEY=plaintext, GITHUB_REPOSITORY="ada/shop", GITHUB_SHA="4f2c9e1")

    assert Message.objects.get(role="user").text == "Deployed ada/shop at 4f2c9e1"


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_legacy_curl_example_reaches_the_legacy_webhook(live_server):
    _, plaintext = make_key(UserFactory(), "old", Generation.V1)
    code = example(for_new_key(live_server.url, plaintext, Generation.V1), "curl")

    output = run(["bash", "-c", code])

    assert '"channel"' in output and '"phoneNumber"' in output
