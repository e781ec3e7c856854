"""A newcomer's first message under `make run`, as README.md's Quick start tells it: the same commands the Makefile
runs (migrate, then `manage.py serve` with DEBUG on and nothing else set, so SQLite and the default backends), then
the README's own shell commands, read from it and run by bash: the key from `createapikey`, the curl POST of "Remind
me to stretch at 3pm" and the curl GET of its receipt (only the port and the message id put in). The built-in
assistant asks the person's approval (a key's message), and once it is given schedules the reminder; the worker
inside the server's process fires it into the thread. Time moves on by moving the reminder task's run_after, as in
test_reminders.py."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
SETTLE_SECONDS = 60  # every wait below is bounded by this (a generous bound: a loaded 2-core machine is slow)


def newcomer_environment(database: Path) -> dict[str, str]:
    """What `make run` sees on a fresh clone: DEBUG=1 and nothing of ours (no DATABASE_URL, REDIS_URL, TASK_BACKEND,
    ASSISTANT_BACKEND from the developer's shell), the SQLite file put in the test's own folder."""
    ours = {
        "DATABASE_URL",
        "REDIS_URL",
        "TASK_BACKEND",
        "ASSISTANT_BACKEND",
        "DJANGO_SETTINGS_MODULE",
        "PUBLIC_BASE_URL",
    }
    env = {name: value for name, value in os.environ.items() if name not in ours and not name.startswith("PYTEST")}
    return env | {"DEBUG": "1", "DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1"}


def manage(env: dict[str, str], *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SETTLE_SECONDS * 4,
        check=True,
    )
    return done.stdout


def wait_for_port(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail("the server did not listen in time")


README_ADDRESS = "http://127.0.0.1:8000"


def quick_start_commands() -> list[str]:
    """The shell commands of README.md's Quick start after `make run`, in order: each ```sh block's lines with their
    backslash continuations joined, the `# answer` comments left out."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        joined = block.replace("\\\n", " ")
        commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return [command for command in commands if not command.startswith("make run")]


def readme_shell(command: str, env: dict[str, str], port: int, **names: str) -> str:
    """One README command run by bash as a newcomer would, against the server on ``port``; ``names`` are set as
    shell variables first (the KEY an earlier command set). Its standard output."""
    assignments = "".join(f"{name}={value}; " for name, value in names.items())
    done = subprocess.run(
        ["bash", "-c", assignments + command.replace(README_ADDRESS, f"http://127.0.0.1:{port}")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SETTLE_SECONDS * 4,
        check=True,
    )
    return done.stdout


SHELL_WAIT = """
import time
from django.utils import timezone
from datetime import timedelta
from django_tasks_db.models import DBTaskResult
from conversations.models import Message, Source
from reminders.firing import fire_reminder
from reminders.models import Reminder

deadline = time.monotonic() + {seconds}
print("thread:", list(Message.objects.order_by("created_at", "pk").values_list("text", flat=True)))
# A key's message may change nothing without the person's approval (assistant/approval/requests.py): they approve it, as
# the console's button does.
from assistant.models import Action, ActionState
from ingestion.approvals import answer
while not Action.objects.filter(state=ActionState.AWAITING_APPROVAL).exists() and time.monotonic() < deadline:
    time.sleep(0.2)
asked = Action.objects.filter(state=ActionState.AWAITING_APPROVAL).first()
print("asked:", asked.tool if asked else None)
if asked is not None:
    answer(asked.delivery.conversation.user, asked, approve=True)
while not Reminder.objects.exists() and time.monotonic() < deadline:
    time.sleep(0.2)
reminder = Reminder.objects.first()
print("scheduled:", reminder.text if reminder else None)
DBTaskResult.objects.filter(task_path=fire_reminder.module_path).update(run_after=timezone.now() - timedelta(seconds=1))
while not Message.objects.filter(source=Source.REMINDER).exists() and time.monotonic() < deadline:
    time.sleep(0.2)
print("fired:", list(Message.objects.filter(source=Source.REMINDER).values_list("text", flat=True)))
"""


@pytest.mark.slow
def test_the_readme_quick_start_under_make_run_creates_a_reminder_that_fires(tmp_path):
    make_key, send, ask, sdk = quick_start_commands()
    assert make_key.startswith("KEY=$(") and "createapikey" in make_key
    assert send.startswith("curl -X POST") and '"Remind me to stretch at 3pm"' in send
    assert ask.startswith("curl ") and "/api/v1/inbound/messages/msg_" in ask
    assert "from poke import Poke" in sdk
    env = newcomer_environment(tmp_path / "db.sqlite3")
    manage(env, "migrate", "--no-input")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_port(port, server)
        key = readme_shell(make_key + '; printf %s "$KEY"', env, port)
        assert key.startswith("psk_"), key

        sent = json.loads(readme_shell(send, env, port, KEY=key))
        assert (sent["success"], sent["message"]) == (True, "Message sent successfully")
        assert re.fullmatch(r"msg_[0-9A-Za-z]{24}", sent["id"]), sent
        ask = re.sub(r"msg_[0-9A-Za-z]+", sent["id"], ask)
        deadline = time.monotonic() + SETTLE_SECONDS
        while (receipt := json.loads(readme_shell(ask, env, port, KEY=key)))["status"] != "delivered":
            assert time.monotonic() < deadline, receipt
            time.sleep(0.2)
        assert (receipt["success"], receipt["message"]) == (True, "Delivered to the assistant, which replied.")

        out = manage(env, "shell", "-c", SHELL_WAIT.format(seconds=SETTLE_SECONDS))
        by_sdk = readme_shell(sdk, env, port, KEY=key)  # the official SDK, as the README runs it
    finally:
        server.terminate()
        try:
            server.wait(timeout=SETTLE_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert "Message sent successfully" in by_sdk and "msg_" in by_sdk, by_sdk
    assert "thread: ['Remind me to stretch at 3pm'" in out, out
    assert "asked: schedule_reminder" in out, out
    assert "scheduled: Stretch" in out, out
    assert "fired: ['Reminder: Stretch']" in out, out


@pytest.mark.parametrize(
    ("arguments", "printed"),
    [
        ([], "DEBUG=1 .venv/bin/python manage.py createapikey"),
        (["PORT=8100"], "DEBUG=1 PUBLIC_BASE_URL=http://127.0.0.1:8100 .venv/bin/python manage.py createapikey"),
        (["HOST=0.0.0.0"], "DEBUG=1 PUBLIC_BASE_URL=http://0.0.0.0:8000 .venv/bin/python manage.py createapikey"),
    ],
)
def test_the_key_command_make_run_prints_links_to_the_port_it_serves(arguments, printed):
    """createapikey's set-password link is at PUBLIC_BASE_URL: under `make run PORT=8100` the command it prints says
    so, or the link would point at port 8000 where nothing listens."""
    plan = subprocess.run(
        ["make", "--dry-run", "run", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    shown = [line for line in plan.stdout.splitlines() if "Create a key" in line]
    assert len(shown) == 1 and printed in shown[0], plan.stdout


@pytest.mark.parametrize(
    ("arguments", "served"),
    [
        ([], "DEBUG=${DEBUG-1} .venv/bin/python manage.py serve 127.0.0.1:8000"),
        (["PORT=8150"], "PUBLIC_BASE_URL=http://127.0.0.1:8150 .venv/bin/python manage.py serve 127.0.0.1:8150"),
    ],
)
def test_make_run_serves_with_links_to_its_own_port(arguments, served):
    """The approval links the assistant writes into the thread and texts to the phone are at PUBLIC_BASE_URL: under
    `make run PORT=8150` the server gets it, or they would point at port 8000."""
    plan = subprocess.run(
        ["make", "--dry-run", "run", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    (serve,) = [line for line in plan.stdout.splitlines() if "manage.py serve" in line]
    assert served in serve, serve
