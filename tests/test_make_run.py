"""A newcomer's first message under `make run`: the same commands the Makefile runs (migrate, then `manage.py serve`
with DEBUG on and nothing else set, so SQLite and the default backends), a key from `createapikey`, and "Remind me
to stretch …" sent over HTTP. The built-in assistant asks the person's approval (a key's message), and once it is
given schedules the reminder; the worker inside the server's process fires it into the thread. Time moves on by
moving the reminder task's run_after, as in test_reminders.py."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETTLE_SECONDS = 30  # every wait below is bounded by this


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


SHELL_WAIT = """
import time
from django.utils import timezone
from datetime import timedelta
from django_tasks_db.models import DBTaskResult
from conversations.models import Message, Source
from reminders.firing import fire_reminder
from reminders.models import Reminder

deadline = time.monotonic() + {seconds}
# A key's message may change nothing without the person's approval (assistant/approvals.py): they approve it, as
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


def test_remind_me_to_stretch_under_make_run_creates_a_reminder_that_fires(tmp_path):
    env = newcomer_environment(tmp_path / "db.sqlite3")
    manage(env, "migrate", "--no-input")
    key = manage(env, "createapikey", "--email", "you@example.com", "--name", "my-script").strip().splitlines()[-1]
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
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/inbound/api-message",
            data=json.dumps({"message": "Remind me to stretch in 20 minutes"}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=SETTLE_SECONDS) as answer:
            assert json.load(answer)["success"] is True

        out = manage(env, "shell", "-c", SHELL_WAIT.format(seconds=SETTLE_SECONDS))
    finally:
        server.terminate()
        try:
            server.wait(timeout=SETTLE_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
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
