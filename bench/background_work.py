"""Tasks or a queue of their own? The two mechanisms the worker runs, measured on the same kind of work: a row due at
a given moment (docs/explanation/delivery.md, "Tasks beside the queues").

    .venv/bin/python -m bench.background_work --jobs 40 --idle-seconds 5

On a scratch PostgreSQL database (BENCH_DATABASE_URL's server), with `manage.py worker` as the Procfile runs it:

1. **Tasks** (`--only tasks`: django-tasks-db's loop): ``--jobs`` reminders, each a ``fire_reminder`` task due
   (``run_after``) 2 s after it is written and a quarter of a second apart; the latency of each is its firing time (the
   reminder's ``last_fired_at``) after its due time.
2. **The queue** (`--only channels`: the outbox's queue worker, the mechanism of the deliveries too): ``--jobs``
   texts, each due (``next_attempt_at``) at the same moments, to a Twilio stand-in on 127.0.0.1 answering at once;
   the latency of each is the stand-in's arrival time after its due time.

For each: the worker's CPU per second while idle (``--idle-seconds``, after the jobs: the cost of waiting) and per
job (its CPU over the jobs' window, less the idle rate over that window). Prints one JSON line per
mechanism. The work differs (a reminder writes a message; a text makes an HTTP request), so compare the latencies
and the idle cost; the CPU per job is each mechanism's whole job.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.channels import ACCOUNT_SID, AUTH_TOKEN, PROVIDER, arrivals, percentile, wait_for
from bench.harness import ROOT, cpu_seconds, manage, run_python, scratch_database, service_environment, stand_in, tree

PEOPLE = """
import json
from django.contrib.auth import get_user_model
from channels.models import LinkedAddress
users = [get_user_model().objects.create_user(f"p{n}", f"p{n}@example.com") for n in range(%(jobs)d)]
LinkedAddress.objects.bulk_create(
    [LinkedAddress(user=u, channel="sms", address=f"+1415{n:07d}") for n, u in enumerate(users)])
for n in range(%(jobs)d):  # the reminders' owners: no linked address, so a firing writes a message and sends nothing
    get_user_model().objects.create_user(f"r{n}", f"r{n}@example.com")
print(json.dumps(len(users)))
"""

REMINDERS = """
import json
from datetime import datetime, timedelta, UTC
from django.contrib.auth import get_user_model
from reminders.firing import fire_reminder
from reminders.models import Reminder
first = datetime.now(UTC) + timedelta(seconds=2)
due = []
for n, user in enumerate(get_user_model().objects.filter(username__startswith="r").order_by("pk")):
    at = first + timedelta(seconds=%(spacing)f * n)
    reminder = Reminder.objects.create(owner=user, text=f"r {n}", time_zone="UTC", starts_local="x", next_due_at=at)
    fire_reminder.using(run_after=at).enqueue(reminder.pk, at.isoformat())
    due.append(at.timestamp())
print(json.dumps(due))
"""

FIRED = """
import json
from reminders.models import Reminder
print(json.dumps([r.last_fired_at and r.last_fired_at.timestamp() for r in Reminder.objects.order_by("pk")]))
"""

# Texts to the linked people, each due at its moment (written with the due time, so none is claimable before it).
TEXTS = """
import json
from datetime import datetime, timedelta, UTC
from django.db import transaction
from channels.models import OutboundMessage
from conversations import outbound
from conversations.models import Conversation, Message, Role, Source
from conversations.services import conversation_of
from django.contrib.auth import get_user_model
first = datetime.now(UTC) + timedelta(seconds=2)
due = []
for n, user in enumerate(get_user_model().objects.filter(username__startswith="p").order_by("pk")):
    at = first + timedelta(seconds=%(spacing)f * n)
    with transaction.atomic():
        message = Message.objects.create(conversation=conversation_of(user), role=Role.ASSISTANT,
                                         source=Source.ASSISTANT, text=f"due {at.timestamp()}")
        outbound.written([message.pk])
        OutboundMessage.objects.filter(message=message).update(next_attempt_at=at)
    due.append(at.timestamp())
print(json.dumps(due))
"""


STARTUP_SECONDS = 15  # for the worker to start (its imports) before anything is measured


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40, help="rows due, a quarter of a second apart (default 40)")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="the idle window (default 5)")
    return parser.parse_args()


def worker(kind: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", "--only", kind], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def idle_rate(process: subprocess.Popen[bytes], seconds: float) -> float:
    """CPU seconds per second of the worker while nothing is due."""
    before = cpu_seconds(tree(process.pid))
    time.sleep(seconds)
    return (cpu_seconds(tree(process.pid)) - before) / seconds


def summary(name: str, latencies: list[float], idle: float, cpu: float, window: float, jobs: int) -> dict[str, Any]:
    return {
        "mechanism": name,
        "jobs": len(latencies),
        "latency_p50_ms": round(1000 * statistics.median(latencies)),
        "latency_p99_ms": round(1000 * percentile(latencies, 0.99)),
        "latency_max_ms": round(1000 * max(latencies)),
        "idle_cpu_ms_per_s": round(1000 * idle, 2),
        "cpu_ms_per_job": round(1000 * (cpu - idle * window) / jobs, 2),
    }


def measure_tasks(env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    process = worker("tasks", env)
    try:
        time.sleep(STARTUP_SECONDS)
        cpu_before, started = cpu_seconds(tree(process.pid)), time.monotonic()
        due = run_python(REMINDERS % {"spacing": 0.25}, env)

        def fired() -> list[float | None]:
            return list(run_python(FIRED, env))

        wait_for(lambda: all(fired()), 30 + args.jobs)
        cpu, window = cpu_seconds(tree(process.pid)) - cpu_before, time.monotonic() - started
        idle = idle_rate(process, args.idle_seconds)
    finally:
        process.terminate()
        process.wait(timeout=30)
    latencies = [at - when for at, when in zip(fired(), due, strict=True) if at is not None]
    return summary("tasks (django-tasks-db)", latencies, idle, cpu, window, args.jobs)


def measure_queue(env: dict[str, str], log: Path, args: argparse.Namespace) -> dict[str, Any]:
    process = worker("channels", env)
    try:
        time.sleep(STARTUP_SECONDS)
        cpu_before, started = cpu_seconds(tree(process.pid)), time.monotonic()
        run_python(TEXTS % {"spacing": 0.25}, env)
        wait_for(lambda: len(arrivals(log)) >= args.jobs, 30 + args.jobs)
        cpu, window = cpu_seconds(tree(process.pid)) - cpu_before, time.monotonic() - started
        idle = idle_rate(process, args.idle_seconds)
    finally:
        process.terminate()
        process.wait(timeout=30)
    latencies = [arrived - float(text.split()[1]) for arrived, text in arrivals(log) if text.startswith("due ")]
    return summary("queue (QueueWorker)", latencies, idle, cpu, window, args.jobs)


def main() -> None:
    args = arguments()
    log = Path(tempfile.mkstemp(prefix="bench-background-", suffix=".log")[1])
    provider, port = stand_in(PROVIDER, "0", str(log))
    try:
        with scratch_database("bench_background") as database_url:
            env = service_environment(
                database_url,
                {
                    "PUBLIC_BASE_URL": "https://assistant.example",
                    "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
                    "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
                    "TWILIO_SMS_FROM": "+15005550006",
                    "TWILIO_API_BASE_URL": f"http://127.0.0.1:{port}",
                },
            )
            manage(["migrate", "--no-input", "-v", "0"], env)
            run_python(PEOPLE % {"jobs": args.jobs}, env)
            for result in (measure_tasks(env, args), measure_queue(env, log, args)):
                print(json.dumps(result), flush=True)
    finally:
        provider.terminate()
        provider.wait(timeout=10)
        log.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
