"""What one unit of each kind of work costs the database and the app (docs/explanation/capacity.md): gunicorn as
gunicorn.conf.py runs it, two `manage.py worker` processes as the Procfile runs them (one handing messages to an
assistant runtime on 127.0.0.1, one with the built-in assistant for the approvals), a Twilio on 127.0.0.1, one
scratch PostgreSQL database and Redis.

    .venv/bin/python -m bench.capacity --messages 1000 --rate 100 --json docs/benchmarks/capacity.json

Phases, one after another, each measured alone (the workers not in it are stopped with SIGSTOP; gunicorn is idle
when it is not in it):

- an idle worker, for ``--idle-seconds``: what a worker costs with nothing to do (per second);
- accept: ``--messages`` POSTs to /api/v1/inbound/api-message at ``--rate`` a second from ``--people`` keys;
- delivery: the worker hands those messages to the runtime, which answers at once, and records each reply;
- receipt: GET /api/v1/inbound/messages/{id} for each of them (now delivered);
- console: GET /conversation/, the thread's poll (/conversation/updates/?since=, nothing new) and GET /keys/,
  ``--views`` times each, signed in as the people;
- outbound text: ``--texts`` replies in the outbox of people with a linked phone, sent through Twilio;
- reminder: ``--reminders`` reminders due now, fired by the worker's task loop;
- approval request: ``--approvals`` script messages whose reminder needs the person's approval, delivered to the
  built-in assistant, which asks.

Per unit (bench/cost_meter.py): CPU of the app's processes and of the database's backends, SQL statements (by
bench/statement_probe in each process) and their time seen from the client, PostgreSQL's active time, transactions,
buffers, rows and the WAL written. Every phase is bounded (``--wait-seconds``); the database is dropped afterwards.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from bench import channels
from bench.cost_meter import MONITOR, STATS_SETTLE_SECONDS, CostMeter, difference, per_unit
from bench.delivery import offer
from bench.harness import (
    ROOT,
    free_port,
    manage,
    migrate,
    people_with_keys,
    run_python,
    runtime_process,
    scratch_database,
    stand_in,
    start,
    start_gunicorn,
    tree,
    wait_settled,
    wait_until_up,
)

PROBE = ROOT / "bench" / "statement_probe"
PROBE_WRITE_SECONDS = 0.5  # the probe writes its counts within 0.1 s of a change (bench/statement_probe)

# The people's sessions (console views), and linked phones for those who get texts.
SEED = """
import json
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from channels.models import LinkedAddress
User = get_user_model()
sessions = []
for user in User.objects.filter(username__startswith="p").order_by("pk"):
    store = SessionStore()
    store.update({SESSION_KEY: str(user.pk), HASH_SESSION_KEY: user.get_session_auth_hash(),
                  BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend"})
    store.create()
    sessions.append(store.session_key)
texted = User.objects.filter(username__startswith="t").order_by("pk")
LinkedAddress.objects.bulk_create(
    [LinkedAddress(user=u, channel="sms", address=f"+1415{n:07d}") for n, u in enumerate(texted)])
print(json.dumps(sessions))
"""

# One assistant reply for each of the people with a phone, announced to the outbox as every writer does.
TEXTS = """
import json
from django.db import transaction
from conversations import outbound
from conversations.models import Conversation, Message, Role, Source
threads = list(Conversation.objects.filter(user__username__startswith="t").values_list("pk", flat=True))
with transaction.atomic():
    made = Message.objects.bulk_create([
        Message(conversation_id=threads[n %% len(threads)], role=Role.ASSISTANT, source=Source.ASSISTANT,
                text=f"Your build {n} passed.") for n in range(%(texts)d)])
    outbound.written([m.pk for m in made])
print(json.dumps(len(made)))
"""

# Reminders due now (this minute, in each person's time zone), one a person, as the assistant's tool schedules them.
REMINDERS = """
import json
from zoneinfo import ZoneInfo
from django.contrib.auth import get_user_model
from django.utils import timezone
from reminders.services import schedule_reminder
people = get_user_model().objects.filter(username__startswith="p").select_related("profile").order_by("pk")
made = 0
for person in people[:%(reminders)d]:
    now = timezone.localtime(timezone.now(), ZoneInfo(person.profile.time_zone))
    schedule_reminder(person, "Stand up and stretch", now.strftime("%%Y-%%m-%%dT%%H:%%M"))
    made += 1
print(json.dumps(made))
"""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000, help="messages accepted and delivered (default 1000)")
    parser.add_argument("--rate", type=float, default=100, help="messages a second offered (default 100)")
    parser.add_argument("--people", type=int, default=200, help="people with a key and a session (default 200)")
    parser.add_argument("--views", type=int, default=400, help="views of each console page (default 400)")
    parser.add_argument("--receipts", type=int, default=1000, help="receipts asked for (default 1000)")
    parser.add_argument("--texts", type=int, default=500, help="texts sent through the outbox (default 500)")
    parser.add_argument("--reminders", type=int, default=200, help="reminders fired (default 200, <= --people)")
    parser.add_argument("--approvals", type=int, default=200, help="approval requests (default 200)")
    parser.add_argument("--idle-seconds", type=float, default=10, help="the idle worker's phase (default 10)")
    parser.add_argument("--wait-seconds", type=float, default=120, help="the longest wait for a phase's work")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=STATS_SETTLE_SECONDS,
        help="the wait for PostgreSQL's counters before and after each phase (default %(default)s; less only to try "
        "the harness: the counters are then incomplete)",
    )
    parser.add_argument("--database-prefix", default="bench_capacity", help="the scratch database's name prefix")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every process of the service (repeatable): DATABASE_PREPARED_STATEMENTS=off measures "
        "what a transaction-pooling PgBouncer costs",
    )
    parser.add_argument(
        "--only", default="", help="comma-separated phases: " + ", ".join(key for key, *_ in PHASES) + " (default all)"
    )
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    return parser.parse_args()


@dataclass
class Service:
    """What the phases drive: the processes, the keys, the sessions, the monitoring connection."""

    port: int
    web: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    local_worker: subprocess.Popen[bytes]
    keys: list[str]
    approval_keys: list[str]
    sessions: list[str]
    db: psycopg.Connection[Any]
    provider_log: Path

    def hold(self, *workers: subprocess.Popen[bytes]) -> None:
        time.sleep(PROBE_WRITE_SECONDS)  # the workers' probes write what they counted last
        for worker in workers:
            for pid in tree(worker.pid):
                os.kill(pid, signal.SIGSTOP)

    def release(self, *workers: subprocess.Popen[bytes]) -> None:
        for worker in workers:
            for pid in tree(worker.pid):
                os.kill(pid, signal.SIGCONT)


def environment(database_url: str, runtime_url: str, provider_url: str, probe_dir: Path) -> dict[str, str]:
    """The channels benchmark's environment (Twilio on 127.0.0.1), the delivery benchmark's runtime, gunicorn's
    own number of workers, no limit that could refuse the load, and the statement probe in every process."""
    options = argparse.Namespace(concurrency=64)
    env = channels.environment(database_url, provider_url, options)
    del env["WEB_CONCURRENCY"]
    env.update(
        {
            "RECEIPT_RATE_LIMIT": "1000000/m",
            "ASSISTANT_BACKEND": "webhook",
            "ASSISTANT_WEBHOOK_URL": runtime_url,
            "ASSISTANT_WEBHOOK_SECRET": "whsec_" + "YmVuY2htYXJrLXJ1bnRpbWUtc2hhcmVkLXNlY3JldC0zMmI=",
            "PYTHONPATH": str(PROBE),
            "CAPACITY_PROBE_DIR": str(probe_dir),
            "STATIC_ROOT": str(probe_dir / "static"),
        }
    )
    return env


def drive(port: int, requests: list[tuple[str, dict[str, str]]], threads: int = 4) -> Counter[int]:
    """GET each (path, headers) over ``threads`` keep-alive connections; the statuses answered."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    pending = iter(requests)

    def loop() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            with lock:
                item = next(pending, None)
            if item is None:
                break
            connection.request("GET", item[0], headers={"Host": "127.0.0.1", **item[1]})
            answer = connection.getresponse()
            answer.read()
            with lock:
                statuses[answer.status] += 1
        connection.close()

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return statuses


def wait_for(condition: Callable[[], bool], seconds: float, poll: float = 0.5) -> bool:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(poll)
    return False


def count(db: psycopg.Connection[Any], sql: str) -> int:
    row = db.execute(sql).fetchone()
    return int(row[0]) if row else 0


DELIVERED = "SELECT count(*) FROM conversations_delivery WHERE status = 'delivered'"


# --- the phases: each does its work and says how many units it did ---------------------------------------------------


def idle(service: Service, args: argparse.Namespace) -> int:
    service.release(service.worker)
    time.sleep(args.idle_seconds)
    service.hold(service.worker)
    return round(args.idle_seconds)


def accept(service: Service, args: argparse.Namespace) -> int:
    accepted, _refused, _took = offer(service.port, service.keys, args.rate, args.messages / args.rate)
    return accepted


def delivery(service: Service, args: argparse.Namespace) -> int:
    before = count(service.db, DELIVERED)
    service.release(service.worker)
    wait_settled(service.db, args.wait_seconds, poll=0.5)
    service.hold(service.worker)
    return count(service.db, DELIVERED) - before


def receipt(service: Service, args: argparse.Namespace) -> int:
    rows = service.db.execute(
        "SELECT m.public_id, u.username FROM conversations_message AS m "
        "JOIN conversations_conversation AS c ON c.id = m.conversation_id JOIN auth_user AS u ON u.id = c.user_id "
        "WHERE m.source = 'api' AND u.username LIKE 'p%%' ORDER BY m.id LIMIT %s",
        [args.receipts],
    ).fetchall()
    requests = [
        (f"/api/v1/inbound/messages/{public_id}", {"Authorization": f"Bearer {service.keys[int(name[1:])]}"})
        for public_id, name in rows
    ]
    return drive(service.port, requests)[200]


def poll_path() -> str:
    """The thread's poll (static/js/thread.js: every 2 s while the page is in view), since now: nothing new."""
    return f"/conversation/updates/?since={quote(datetime.now(UTC).isoformat())}"


def console_page(path_now: Callable[[], str]) -> Callable[[Service, argparse.Namespace], int]:
    def view(service: Service, args: argparse.Namespace) -> int:
        sessions, path = service.sessions, path_now()
        requests = [(path, {"Cookie": f"sessionid={sessions[n % len(sessions)]}"}) for n in range(args.views)]
        return drive(service.port, requests)[200]

    return view


def outbound_text(service: Service, args: argparse.Namespace) -> int:
    sent_before = len(channels.texts(service.provider_log))
    service.release(service.worker)
    wait_for(lambda: len(channels.texts(service.provider_log)) >= sent_before + args.texts, args.wait_seconds, 0.1)
    service.hold(service.worker)
    return len(channels.texts(service.provider_log)) - sent_before


def reminder(service: Service, args: argparse.Namespace) -> int:
    scheduled = "SELECT count(*) FROM reminders_reminder WHERE status = 'scheduled'"
    service.release(service.worker)
    wait_for(lambda: count(service.db, scheduled) == 0, args.wait_seconds)
    service.hold(service.worker)
    return count(service.db, "SELECT count(*) FROM reminders_reminder WHERE status = 'done'")


def approval_request(service: Service, args: argparse.Namespace) -> int:
    service.release(service.local_worker)
    wait_settled(service.db, args.wait_seconds, poll=0.5)
    service.hold(service.local_worker)
    return count(service.db, "SELECT count(*) FROM assistant_action WHERE state = 'awaiting_approval'")


# --- what each phase needs beforehand (not measured) -----------------------------------------------------------------


def nothing(service: Service, env: dict[str, str], args: argparse.Namespace) -> None:
    pass


def seed_texts(service: Service, env: dict[str, str], args: argparse.Namespace) -> None:
    run_python(TEXTS % {"texts": args.texts}, {**env, "CAPACITY_PROBE_ROLE": "seed"})


def seed_reminders(service: Service, env: dict[str, str], args: argparse.Namespace) -> None:
    run_python(REMINDERS % {"reminders": args.reminders}, {**env, "CAPACITY_PROBE_ROLE": "seed"})


def seed_approvals(service: Service, env: dict[str, str], args: argparse.Namespace) -> None:
    """Script messages asking for a reminder; the key's tools need the person's approval (the default)."""
    body = b'{"message": "Remind me to renew the domain tomorrow at 3pm"}'
    for n in range(args.approvals):
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
        key = service.approval_keys[n % len(service.approval_keys)]
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connection.request("POST", "/api/v1/inbound/api-message", body, headers)
        connection.getresponse().read()
        connection.close()


# (name for --only, what a unit is, what it needs first, the work). The delivery and the receipts need the accepted
# messages before them.
PHASES: list[tuple[str, str, Any, Any]] = [
    ("idle", "idle worker, per second", nothing, idle),
    ("accept", "accepted message", nothing, accept),
    ("delivery", "delivery to the runtime", nothing, delivery),
    ("receipt", "receipt", nothing, receipt),
    ("thread", "console: the thread", nothing, console_page(lambda: "/conversation/")),
    ("poll", "console: the thread's poll, nothing new", nothing, console_page(poll_path)),
    ("keys", "console: API keys", nothing, console_page(lambda: "/keys/")),
    ("text", "outbound text", seed_texts, outbound_text),
    ("reminder", "reminder fired", seed_reminders, reminder),
    ("approval", "approval request", seed_approvals, approval_request),
]


def measure(meter: CostMeter, service: Service, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    results = {}
    chosen = args.only.split(",") if args.only else [key for key, *_ in PHASES]
    for _key, name, prepare, run in (phase for phase in PHASES if phase[0] in chosen):
        prepare(service, env, args)
        meter.settle()
        load_before = os.getloadavg()
        before = meter.snapshot()
        wal_window = meter.wal_window()
        started = time.monotonic()
        units = run(service, args)
        took = time.monotonic() - started
        wal_window.stop()
        meter.settle()
        after = meter.snapshot()
        wal = wal_window.read()
        spent = difference(before, after)
        results[name] = {
            **per_unit(spent, wal, units),
            "run_seconds": round(took, 1),
            "load_average": [round(v, 2) for v in (*load_before, *os.getloadavg())],
            "spent": {**spent, "wal": wal},
        }
        print(name, json.dumps({k: v for k, v in results[name].items() if k != "spent"}), flush=True)
    return results


STORED = ("conversations_message", "conversations_delivery", "channels_outboundmessage", "assistant_action",
          "reminders_reminder")  # fmt: skip


def storage(db: psycopg.Connection[Any]) -> dict[str, dict[str, float]]:
    """What the rows written by the phases take on disk: per table, its rows, and bytes per row of the table (with
    its TOAST) and of its indexes. At a few thousand rows a table's first pages weigh a little more than at millions."""
    found = {}
    for table in STORED:
        rows = count(db, f"SELECT count(*) FROM {table}")
        heap, indexes = db.execute("SELECT pg_table_size(%s), pg_indexes_size(%s)", [table, table]).fetchone()  # type: ignore[misc]
        found[table] = {
            "rows": rows,
            "table_bytes_per_row": round(heap / max(rows, 1)),
            "index_bytes_per_row": round(indexes / max(rows, 1)),
        }
    return found


def warm_up(service: Service) -> None:
    """Every gunicorn worker meets keys, receipts and pages; the worker delivers a first few messages."""
    offer(service.port, service.keys, rate=100, seconds=len(service.keys) / 100)
    wait_settled(service.db, 60, poll=0.5)
    headers = {"Cookie": f"sessionid={service.sessions[0]}"}
    statuses = drive(service.port, [("/conversation/", headers), ("/keys/", headers)] * 10)
    if set(statuses) != {200}:
        raise SystemExit(f"the console answered {dict(statuses)}: the sessions do not sign in")
    service.hold(service.worker)


def start_service(env: dict[str, str], args: argparse.Namespace, db: psycopg.Connection[Any], log: Path) -> Service:
    keys = people_with_keys(env, args.people, "p")
    approval_keys = people_with_keys(env, max(1, args.approvals), "a")
    people_with_keys(env, max(1, args.texts // 5), "t")
    sessions = run_python(SEED, env)
    port = free_port()
    web = start_gunicorn({**env, "CAPACITY_PROBE_ROLE": "web"}, port)
    worker_command = ["manage.py", "worker", "--no-reload", "--no-startup-delay"]
    worker = start(worker_command, {**env, "CAPACITY_PROBE_ROLE": "worker"})
    # Deliveries only: a worker stopped while it held a transaction (its task loop, its housekeeping) would hold
    # that transaction's locks across the other phases; a delivery claim is one statement.
    local_env = {**env, "CAPACITY_PROBE_ROLE": "worker", "ASSISTANT_BACKEND": "local"}
    local = start([*worker_command, "--only", "deliveries"], local_env)
    wait_until_up(port)
    time.sleep(3)  # the workers start
    service = Service(port, web, worker, local, keys, approval_keys, sessions, db, log)
    service.hold(local)
    warm_up(service)
    return service


def main() -> None:
    args = arguments()
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    probe_dir = Path(tempfile.mkdtemp(prefix="capacity-probe-"))
    seen = Path(tempfile.mkstemp(prefix="capacity-runtime-")[1])
    log = Path(tempfile.mkstemp(prefix="capacity-provider-")[1])
    runtime, runtime_url = runtime_process(0, seen)
    provider, provider_port = stand_in(channels.PROVIDER, "0", str(log))
    processes: list[subprocess.Popen[bytes]] = [runtime, provider]
    try:
        with scratch_database(args.database_prefix) as database_url:
            env = environment(database_url, runtime_url, f"http://127.0.0.1:{provider_port}", probe_dir)
            env.update(setting.split("=", 1) for setting in args.setting)
            migrate(env)
            manage(["collectstatic", "--no-input", "-v", "0"], env)  # the console's pages name the hashed files
            with psycopg.connect(database_url, autocommit=True, application_name=MONITOR) as db:
                service = start_service(env, args, db, log)
                processes += [service.web, service.worker, service.local_worker]
                groups = {
                    "web": lambda: tree(service.web.pid),
                    "worker": lambda: tree(service.worker.pid) + tree(service.local_worker.pid),
                }
                meter = CostMeter(database_url, groups, probe_dir, args.settle_seconds)
                results = measure(meter, service, env, args)
                stored = storage(db)
                server_version = db.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
                service.release(service.worker, service.local_worker)
    finally:
        for process in reversed(processes):
            for pid in tree(process.pid):
                os.kill(pid, signal.SIGCONT)  # a worker held by a phase, so that it can stop
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        seen.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        shutil.rmtree(probe_dir, ignore_errors=True)
    report = {
        "started_at": started_at,
        "arguments": vars(args),
        "cores": os.cpu_count(),
        "postgresql": server_version,
        "phases": results,
        "storage": stored,
    }
    print(json.dumps(stored))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
