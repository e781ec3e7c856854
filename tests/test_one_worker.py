"""One worker process type runs every kind of background work (delivery/work.py): started alone, exactly as the
Procfile writes it, it hands a person's message to the assistant and sends the reply to their linked Telegram chat
and phone; `manage.py serve` (`make run`) runs the same work inside the server, so the texts leave there too. Both
on SQLite files, as a fresh clone runs them, with Telegram and Twilio played by the stand-ins of tests/providers.py.
"""

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.providers import (
    TELEGRAM_BOT_TOKEN,
    TELEGRAM_BOT_USERNAME,
    TELEGRAM_WEBHOOK_SECRET,
    TWILIO_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN,
    TWILIO_SMS_FROM,
    FakeTelegram,
    FakeTwilio,
)
from tests.servers import serving
from tests.test_make_run import manage, newcomer_environment, wait_for_port

pytestmark = pytest.mark.slow  # an end-to-end test that takes seconds (pyproject.toml)

ROOT = Path(__file__).resolve().parent.parent
SETTLE_SECONDS = 45  # every wait below is bounded by this
CHAT_ID = "424242"
PHONE = "+14155550134"

# Two people, one with a linked Telegram chat, one with a linked phone, each writing a message from the console.
SEED = """
import json
from django.contrib.auth import get_user_model
from channels.models import LinkedAddress
from conversations.models import Endpoint
from ingestion.hotpath.recording import record_user_message
for n, (channel, address) in enumerate([("telegram", %(chat)r), ("sms", %(phone)r)]):
    user = get_user_model().objects.create_user(f"p{n}", f"p{n}@example.com")
    LinkedAddress.objects.create(user=user, channel=channel, address=address)
    record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="What can you do?")
print(json.dumps(2))
"""

OUTBOX = """
import json
from channels.models import OutboundMessage
print(json.dumps(sorted(OutboundMessage.objects.values_list("channel", "status"))))
"""


def environment(database: Path, telegram: FakeTelegram, twilio: FakeTwilio) -> dict[str, str]:
    return newcomer_environment(database) | {
        "PUBLIC_BASE_URL": "https://assistant.example",
        "TELEGRAM_BOT_TOKEN": TELEGRAM_BOT_TOKEN,
        "TELEGRAM_BOT_USERNAME": TELEGRAM_BOT_USERNAME,
        "TELEGRAM_WEBHOOK_SECRET": TELEGRAM_WEBHOOK_SECRET,
        "TELEGRAM_API_BASE_URL": telegram.url,
        "TWILIO_ACCOUNT_SID": TWILIO_ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": TWILIO_AUTH_TOKEN,
        "TWILIO_SMS_FROM": TWILIO_SMS_FROM,
        "TWILIO_API_BASE_URL": twilio.url,
        "HOUSEKEEPING_SECONDS": "60",
    }


def procfile_command(process_type: str) -> list[str]:
    """The Procfile's line for ``process_type``, run with this interpreter (the PaaS's ``python``)."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process_type:
            words = shlex.split(command)
            return [sys.executable, *words[1:]] if words[0] == "python" else words
    raise AssertionError(f"no {process_type!r} in the Procfile")


def wait_for_texts(telegram: FakeTelegram, twilio: FakeTwilio, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline and not (telegram.texts_to(CHAT_ID) and twilio.texts_to(PHONE)):
        assert process.poll() is None, "the process exited"
        time.sleep(0.2)


def stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=SETTLE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def test_the_procfile_has_three_process_types():
    types = [line.partition(":")[0] for line in (ROOT / "Procfile").read_text().splitlines() if line.strip()]
    assert types == ["release", "web", "worker"]


def test_the_procfile_worker_alone_hands_messages_over_and_texts_the_replies(tmp_path):
    with serving(FakeTelegram()) as telegram, serving(FakeTwilio()) as twilio:
        env = environment(tmp_path / "db.sqlite3", telegram, twilio)
        manage(env, "migrate", "--no-input")
        manage(env, "shell", "-c", SEED % {"chat": CHAT_ID, "phone": PHONE})
        worker = subprocess.Popen(
            procfile_command("worker"), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            wait_for_texts(telegram, twilio, worker)
        finally:
            output = stop(worker)
        assert worker.returncode == 0, output
        assert len(telegram.texts_to(CHAT_ID)) == 1, output
        assert len(twilio.texts_to(PHONE)) == 1, output
        outbox = json.loads(manage(env, "shell", "-c", OUTBOX).strip().splitlines()[-1])
        assert outbox == [["sms", "sent"], ["telegram", "sent"]]


def test_make_run_texts_the_replies_to_a_linked_chat_and_phone(tmp_path):
    with serving(FakeTelegram()) as telegram, serving(FakeTwilio()) as twilio:
        env = environment(tmp_path / "db.sqlite3", telegram, twilio)
        manage(env, "migrate", "--no-input")
        manage(env, "shell", "-c", SEED % {"chat": CHAT_ID, "phone": PHONE})
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            wait_for_port(port, server)  # type: ignore[arg-type]
            wait_for_texts(telegram, twilio, server)
        finally:
            output = stop(server)
        assert "channels" in output, output  # it said what it runs
        assert len(telegram.texts_to(CHAT_ID)) == 1, output
        assert len(twilio.texts_to(PHONE)) == 1, output
        outbox = json.loads(manage(env, "shell", "-c", OUTBOX).strip().splitlines()[-1])
        assert outbox == [["sms", "sent"], ["telegram", "sent"]]


def test_only_takes_a_selection_and_refuses_an_unknown_kind(tmp_path):
    env = newcomer_environment(tmp_path / "db.sqlite3")
    done = subprocess.run(
        [sys.executable, "manage.py", "worker", "--only", "channels,nonsense", "--batch"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "nonsense" in done.stderr


@pytest.mark.parametrize("only", ["channels", "deliveries,tasks"])
def test_a_selection_runs_only_its_kinds(tmp_path, only):
    """`--only channels` sends what is in the outbox but hands nothing to the assistant; `--only deliveries,tasks`
    the other way round (the reply stays waiting to be sent)."""
    with serving(FakeTelegram()) as telegram, serving(FakeTwilio()) as twilio:
        env = environment(tmp_path / "db.sqlite3", telegram, twilio)
        manage(env, "migrate", "--no-input")
        manage(env, "shell", "-c", SEED % {"chat": CHAT_ID, "phone": PHONE})
        manage(env, "worker", "--only", only, "--batch")
        outbox = json.loads(manage(env, "shell", "-c", OUTBOX).strip().splitlines()[-1])
        if only == "channels":
            assert outbox == []  # no delivery ran, so no reply to send
            assert not telegram.sent and not twilio.sent
        else:
            assert outbox == [["sms", "queued"], ["telegram", "queued"]]
            assert not telegram.sent and not twilio.sent
            manage(env, "worker", "--only", "channels", "--batch")
            assert len(telegram.texts_to(CHAT_ID)) == 1 and len(twilio.texts_to(PHONE)) == 1
