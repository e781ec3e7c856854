"""Every page, receipt, list and prune of a long history, measured on ``--messages`` messages (10M by default)
written by bench/history_build.py into a PostgreSQL database of their own (its migrations; kept with ``--keep`` and
measured again with ``--reuse``):

- each page is requested through Django's test client with the server's settings (DEBUG off), as staff (the
  admin's lists and change pages of messages, deliveries, texts, tool calls, audit and trigger logs), as the person
  (their thread, "Earlier messages", the poll after a burst, their key's page and chart) or with their key (a
  receipt of a recent and of a pruned message, also with ``?wait=0``; the key's message list, its first page and
  the next; ``/metrics``): its queries counted and timed (median of ``--repeat``), and the exact SQL it sent run
  again under EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back: the slowest statement, the buffers read and
  any sequential scan of a large table are reported;
- accepting (``POST /api/v1/inbound/api-message``) ``--accepts`` times, p50 and p99; a claim of 32 deliveries;
- each prune of ops/pruning.py for ``--prune-seconds``: rows deleted, per batch and per second;
- with ``--stall-rows`` (30M): deliveries grown to that many (the extra ones expired), then accepting measured
  alone, with the deliveries' prune running in another process, and alone again.

    .venv/bin/python -m bench.history_at_scale --messages 10000000 --database bench_history_10m --keep \\
        --json docs/benchmarks/history-at-scale.json

Bounded: every statement is cut after ``--statement-seconds``; each prune stops after ``--prune-seconds``.
"""

import argparse
import collections
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import harness, history_build

LARGE_TABLES = {name: True for name in history_build.TABLES}
SETTINGS = {
    "ALLOWED_HOSTS": "testserver,127.0.0.1",
    "METRICS_TOKEN": "bench-metrics-token",
    "INGEST_RATE_LIMIT": "1000000000/m",
    "RECEIPT_RATE_LIMIT": "1000000000/m",
    "AUTH_FAILURE_RATE_LIMIT": "1000000000/m",
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"),
    # Pages render with the production storage's manifest, as a deployment's collectstatic leaves it.
    "STATIC_ROOT": os.path.join(tempfile.gettempdir(), "bench-history-static"),
}
ACCEPT_BODY = {"message": "Deploy finished: remind me to check the dashboard at 17:00.", "source": "bench"}


# --- the database --------------------------------------------------------------------------------------------------


def database(name: str, reuse: bool) -> tuple[str, bool]:
    """The URL of database ``name`` on BENCH_DATABASE_URL's server, made empty unless ``reuse`` finds it built;
    and whether it is to be built."""
    server = urlsplit(harness.SERVER_URL)
    url = urlunsplit(server._replace(path=f"/{name}"))
    with psycopg.connect(urlunsplit(server._replace(path="/postgres")), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None
        if exists and reuse:
            with psycopg.connect(url) as db:
                built = db.execute("SELECT to_regclass('bench_history')").fetchone()[0] is not None  # type: ignore[index]
            if built:
                return url, False
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return url, True


def drop(url: str) -> None:
    server = urlsplit(url)
    name = server.path.lstrip("/")
    with psycopg.connect(urlunsplit(server._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def built_history(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Migrate, make the measured person (a staff account apart), write the history; remembered in the database
    (table bench_history) so that ``--reuse`` measures it again."""
    env = harness.service_environment(url, SETTINGS)
    harness.migrate(env)
    key = harness.people_with_keys(env, 1, "measured")[0]
    with psycopg.connect(url, autocommit=True) as db:
        person = db.execute("SELECT id FROM auth_user WHERE username = 'measured0'").fetchone()[0]  # type: ignore[index]
    print(f"building {args.messages:,} messages over {args.people:,} people and {args.days} days", flush=True)
    with psycopg.connect(url, autocommit=True) as db:
        history = history_build.build(db, person, messages=args.messages, people=args.people, days=args.days)
        history |= {"key": key, "person": person}
        db.execute("CREATE TABLE bench_history (built jsonb)")
        db.execute("INSERT INTO bench_history VALUES (%s)", [json.dumps(history, default=str)])
    return history


def remembered_history(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as db:
        return db.execute("SELECT built FROM bench_history").fetchone()[0]  # type: ignore[index]


# --- plans ---------------------------------------------------------------------------------------------------------


def explained(db: psycopg.Connection[Any], sql: str) -> dict[str, Any]:
    """``sql`` run again under EXPLAIN (ANALYZE, BUFFERS) and rolled back: its time, buffers and scans."""
    try:
        with db.transaction(force_rollback=True):
            plan = db.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql).fetchone()[0][0]  # type: ignore[index]
    except psycopg.Error as error:
        return {"sql": sql[:300], "error": str(error).splitlines()[0]}
    top = plan["Plan"]
    scans: list[str] = []
    _scans_of(top, scans)
    return {
        "sql": sql[:300],
        "ms": round(plan["Execution Time"] + plan.get("Planning Time", 0), 2),
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "scans": scans,
    }


def _scans_of(node: dict[str, Any], scans: list[str]) -> None:
    if "Relation Name" in node:
        how = node["Node Type"] + (f" using {node['Index Name']}" if "Index Name" in node else "")
        scans.append(f"{node['Relation Name']}: {how}")
    for child in node.get("Plans", []):
        _scans_of(child, scans)


def sequential_scans(plans: list[dict[str, Any]]) -> list[str]:
    return sorted({scan for plan in plans for scan in plan.get("scans", []) if "Seq Scan" in scan
                   and scan.split(":")[0] in LARGE_TABLES})  # fmt: skip


STATEMENTS = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


def plans_of(db: psycopg.Connection[Any], captured: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [explained(db, query["sql"]) for query in captured if query["sql"].lstrip().upper().startswith(STATEMENTS)]


def summary(name: str, times: list[float], captured: list[dict[str, str]], plans: list[dict[str, Any]],
            status: int) -> dict[str, Any]:  # fmt: skip
    slowest = max(plans, key=lambda plan: plan.get("ms", 0), default={})
    result = {
        "page": name,
        "status": status,
        "ms": round(statistics.median(times) * 1000, 1),
        "queries": len(captured),
        "buffers": sum(plan.get("buffers", 0) for plan in plans),
        "slowest_ms": slowest.get("ms", 0),
        "slowest": slowest,
        "seq_scans": sequential_scans(plans),
    }
    print(
        f"{name[:58]:58} {status:>4} {result['ms']:>9.1f} ms {result['queries']:>3} q "
        f"slowest {result['slowest_ms']:>8.1f} ms {result['buffers']:>8} buffers"
        + (f"  SEQ {', '.join(result['seq_scans'])}" if result["seq_scans"] else ""),
        flush=True,
    )
    return result


# --- the measures --------------------------------------------------------------------------------------------------


class Measures:
    """The measures, in one process with the server's settings (set up by ``start_django``)."""

    def __init__(self, url: str, history: dict[str, Any], repeat: int, statement_ms: int) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        self.history, self.repeat, self.results = history, repeat, []  # type: ignore[var-annotated]
        self.plans = psycopg.connect(url)
        self.plans.execute(f"SET statement_timeout = {statement_ms}")
        self.staff = Client()
        staff, _ = get_user_model().objects.get_or_create(username="bench-staff", is_staff=True, is_superuser=True)
        self.staff.force_login(staff)
        self.person = Client()
        self.person.force_login(get_user_model().objects.get(pk=history["person"]))
        self.api = Client(HTTP_AUTHORIZATION=f"Bearer {history['key']}")
        self.metrics = Client(HTTP_AUTHORIZATION=f"Bearer {SETTINGS['METRICS_TOKEN']}")

    def page(self, name: str, request: Callable[[], Any]) -> Any:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        request()  # a first request: the process remembers the key, the session, the templates
        times, response = [], None
        for _ in range(self.repeat):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = request()
                times.append(time.perf_counter() - started)
        captured = queries.captured_queries
        assert response is not None
        self.results.append(summary(name, times, captured, plans_of(self.plans, captured), response.status_code))
        return response

    def pages(self, ids: dict[str, Any]) -> None:
        for name, path in admin_pages(ids):
            self.page(f"admin: {name}", functools.partial(self.staff.get, path))
        for name, path in console_pages(ids):
            self.page(f"console: {name}", functools.partial(self.person.get, path))
        first = self.page("API: the key's list, first page", lambda: self.api.get("/api/v1/inbound/messages"))
        cursor = first.json()["next_cursor"]
        self.page("API: the key's list, next page", lambda: self.api.get(f"/api/v1/inbound/messages?cursor={cursor}"))
        receipt = f"/api/v1/inbound/messages/{ids['recent']}"
        self.page("API: receipt, recent message", lambda: self.api.get(receipt))
        self.page("API: receipt, recent message, ?wait=0", lambda: self.api.get(receipt + "?wait=0"))
        self.page("/metrics", lambda: self.metrics.get("/metrics"))

    def pruned_receipts(self, ids: dict[str, Any]) -> None:
        receipt = f"/api/v1/inbound/messages/{ids['oldest']}"
        self.page("API: receipt, pruned delivery's message", lambda: self.api.get(receipt))
        self.page("API: receipt, pruned delivery's message, ?wait=0", lambda: self.api.get(receipt + "?wait=0"))

    def claim(self) -> None:
        from django.db import transaction

        from delivery import lifecycle

        def claimed() -> Any:
            with transaction.atomic():
                rows = lifecycle.claim(32)
                transaction.set_rollback(True)
            return type("Claimed", (), {"status_code": len(rows)})

        self.page("a claim of 32 deliveries (status: rows claimed)", claimed)


def accept_latencies(api: Any, count: int, until: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """POST api-message ``count`` times (or until ``until``); p50, p99 and the slowest, in ms."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = api.post("/api/v1/inbound/api-message", ACCEPT_BODY, content_type="application/json")
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content
        if until():
            break
    times.sort()
    return {
        "accepted": len(times),
        "p50_ms": round(times[len(times) // 2], 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
        "max_ms": round(times[-1], 2),
    }


# Each prune as the housekeeping runs it; the commands' count is read from what they print.
PRUNES = {
    "deliveries (DELIVERY_RETENTION_DAYS)": "from delivery.retention import prune_settled_deliveries as prune",
    "texts (OUTBOX_RETENTION_DAYS)": "prune = lambda: command('prunetexts')",
    "audit (AUDIT_RETENTION_DAYS)": "prune = lambda: command('pruneaudit')",
    "idempotency records (IDEMPOTENCY_KEY_TTL_SECONDS)": "from ingestion.idempotency import prune_expired as prune",
    "trigger deliveries (TRIGGER_DELIVERY_RETENTION_SECONDS)": (
        "from triggers.services import prune_received_deliveries as prune"
    ),
}


def command(name: str) -> int:
    """Run a prune's management command; how many rows it says it deleted."""
    import io

    from django.core.management import call_command

    said = io.StringIO()
    call_command(name, stdout=said)
    return int(said.getvalue().split()[1])


def prune_job(code: str) -> Callable[[], int]:
    scope: dict[str, Any] = {"command": command}
    exec(code, scope)  # one of PRUNES: our own import lines
    return scope["prune"]


def time_by_statement(captured: list[dict[str, str]]) -> dict[str, float]:
    """Where a prune's time went: the seconds of its statements, by their first words."""
    spent: dict[str, float] = {}
    for query in captured:
        shape = " ".join(query["sql"].split()[:6])[:70]
        spent[shape] = round(spent.get(shape, 0.0) + float(query["time"]), 2)
    return dict(sorted(spent.items(), key=lambda item: -item[1])[:6])


def prune(measures: Measures, name: str, code: str, seconds: int) -> dict[str, Any]:
    """One run of a prune for ``seconds`` (its PRUNE_RUN_SECONDS): rows deleted, per batch and per second, where
    the time went; the plan of its choice of a batch."""
    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext, override_settings

    reset_queries()  # the query log keeps 9,000 statements: a run's own must all be in it
    with override_settings(PRUNE_RUN_SECONDS=seconds), CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        deleted = prune_job(code)()
        took = time.perf_counter() - started
    batches = max(1, -(-deleted // settings.PRUNE_BATCH_ROWS))
    captured = queries.captured_queries
    result = {
        "prune": name, "deleted": deleted, "seconds": round(took, 1), "batches": batches,
        "ms_per_batch": round(took * 1000 / batches, 1), "rows_per_s": round(deleted / took),
        "statements_per_batch": round(len(captured) / batches, 1), "seconds_by_statement": time_by_statement(captured),
        "next_batch": plans_of(measures.plans, captured[:1]),
    }  # fmt: skip
    print(f"prune {name[:52]:52} {deleted:>9,} rows in {took:6.1f} s: {result['ms_per_batch']:>7.1f} ms a batch, "
          f"{result['rows_per_s']:>7,} rows/s", flush=True)  # fmt: skip
    return result


def lock_waits(url: str, stop: threading.Event) -> dict[str, Any]:
    """Every 50 ms until ``stop``: how many of the database's sessions wait for a lock (an INSERT held up by the
    prune's would), and which locks and statements."""
    samples, waiting, most, seen = 0, 0, 0, collections.Counter[str]()
    with psycopg.connect(url, autocommit=True) as db:
        while not stop.wait(0.05):
            rows = db.execute(
                "SELECT wait_event, left(query, 60) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchall()
            samples, waiting, most = samples + 1, waiting + bool(rows), max(most, len(rows))
            seen.update(f"{event}: {query}" for event, query in rows)
    return {"samples": samples, "samples_with_a_lock_wait": waiting, "most_waiting": most, "waits": dict(seen)}


def stall(measures: Measures, url: str, accepts: int, seconds: int) -> dict[str, Any]:
    """Accepting alone, then while the deliveries' prune runs in a process of its own, then alone again."""
    accept_latencies(measures.api, 20)  # warm: the key remembered, the indexes' recent pages read
    alone = accept_latencies(measures.api, accepts)
    code = PRUNES["deliveries (DELIVERY_RETENTION_DAYS)"] + "\nprint('pruning', flush=True)\nprint('deleted', prune())"
    env = harness.service_environment(url, SETTINGS | {"PRUNE_RUN_SECONDS": str(seconds)})
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    pruning = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=harness.ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    while not pruning.stdout.readline().startswith("pruning"):  # type: ignore[union-attr]
        pass  # the shell's own lines: the prune starts next
    stop, waits = threading.Event(), {}
    sampler = threading.Thread(target=lambda: waits.update(lock_waits(url, stop)))
    sampler.start()
    during = accept_latencies(measures.api, accepts * 100, until=lambda: pruning.poll() is not None)
    stop.set()
    sampler.join()
    out, _ = pruning.communicate(timeout=seconds + 120)
    after = accept_latencies(measures.api, accepts)
    result: dict[str, Any] = {
        "alone": alone, "during the prune": during, "alone, after": after, "prune": out.strip().splitlines()[-1],
        "lock waits during the prune": waits,
    }  # fmt: skip
    for name in ("alone", "during the prune", "alone, after"):
        figures = result[name]
        print(f"accept {name:18}: {figures['accepted']:>5} accepted, p50 {figures['p50_ms']} ms, "
              f"p99 {figures['p99_ms']} ms, max {figures['max_ms']} ms", flush=True)  # fmt: skip
    print(f"  the prune: {result['prune']}; lock waits: {waits}", flush=True)
    return result


def measured_ids(history: dict[str, Any]) -> dict[str, Any]:
    """The rows the pages open: the middle of the person's thread, with its delivery, tool call and text."""
    from accounts.models import AuditEvent
    from assistant.models import Action
    from channels.models import OutboundMessage
    from conversations.models import Delivery, Message
    from ingestion.models import TriggerFiring

    values = history["values"]
    thread = Message.objects.filter(conversation_id=values["conversation"])
    middle = thread.filter(role="user", api_key_id=values["key"], id__gte=values["last_pair"] // 2).order_by("id")
    middle_message = middle.first()
    assert middle_message is not None
    delivery = Delivery.objects.get(message=middle_message)
    burst = thread.filter(id__gt=values["last_pair"]).order_by("id")
    oldest = Delivery.objects.filter(api_key_id=values["key"], status="delivered").order_by("id").first()
    assert oldest is not None
    return {
        "conversation": values["conversation"], "key": values["key"], "trigger": values["trigger"],
        "email": "measured0@example.com", "middle": middle_message,
        "delivery": delivery.pk,
        "action": Action.objects.filter(delivery__conversation_id=values["conversation"]).order_by("-id").first(),
        "text": OutboundMessage.objects.order_by("-id").first(),
        "audit": AuditEvent.objects.filter(account_id=history["person"]).order_by("-at").first(),
        "firing": TriggerFiring.objects.filter(trigger_id=values["trigger"]).order_by("-id").first(),
        "burst_since": burst.first().created_at.isoformat(),  # type: ignore[union-attr]
        "recent": burst.filter(delivery__status="delivered").last().public_id,  # type: ignore[union-attr]
        "oldest": oldest.message.public_id,
    }  # fmt: skip


def admin_pages(ids: dict[str, Any]) -> list[tuple[str, str]]:
    middle = ids["middle"]
    return [
        ("messages", "/admin/conversations/message/"),
        ("messages, page 3", "/admin/conversations/message/?p=3"),
        ("messages of one thread", f"/admin/conversations/message/?conversation__id__exact={ids['conversation']}"),
        ("messages, search by id", f"/admin/conversations/message/?q={middle.public_id}"),
        ("messages, search by email", f"/admin/conversations/message/?q={ids['email']}"),
        ("a message", f"/admin/conversations/message/{middle.pk}/change/"),
        ("a conversation", f"/admin/conversations/conversation/{ids['conversation']}/change/"),
        ("deliveries", "/admin/conversations/delivery/"),
        ("deliveries, failed", "/admin/conversations/delivery/?status__exact=failed"),
        ("deliveries of one key", f"/admin/conversations/delivery/?api_key={ids['key']}"),
        ("deliveries, search by message id", f"/admin/conversations/delivery/?q={middle.public_id}"),
        ("a delivery", f"/admin/conversations/delivery/{ids['delivery']}/change/"),
        ("texts", "/admin/channels/outboundmessage/"),
        ("texts, failed", "/admin/channels/outboundmessage/?status__exact=failed"),
        ("a text", f"/admin/channels/outboundmessage/{ids['text'].pk}/change/"),
        ("tool calls", "/admin/assistant/action/"),
        ("a tool call", f"/admin/assistant/action/{ids['action'].pk}/change/"),
        ("audit", "/admin/accounts/auditevent/"),
        ("audit, search by email", f"/admin/accounts/auditevent/?q={ids['email']}"),
        ("an audit line", f"/admin/accounts/auditevent/{ids['audit'].pk}/change/"),
        ("trigger logs", "/admin/ingestion/triggerfiring/"),
        ("trigger logs of one trigger", f"/admin/ingestion/triggerfiring/?trigger__id__exact={ids['trigger']}"),
        ("a trigger log line", f"/admin/ingestion/triggerfiring/{ids['firing'].pk}/change/"),
    ]


def console_pages(ids: dict[str, Any]) -> list[tuple[str, str]]:
    from urllib.parse import quote

    return [
        ("the thread", "/conversation/"),
        ("Earlier messages (from the thread's middle)", f"/conversation/?before={ids['middle'].public_id}"),
        ("updates since a burst of 11,377", f"/conversation/updates/?since={quote(ids['burst_since'])}"),
        ("a message and what became of it", f"/conversation/messages/{ids['middle'].public_id}/"),
        ("the key's page and 14-day chart", f"/keys/{ids['key']}/"),
    ]


def start_django(url: str) -> None:
    env = harness.service_environment(url, SETTINGS)
    if not os.path.exists(os.path.join(SETTINGS["STATIC_ROOT"], "staticfiles.json")):
        harness.manage(["collectstatic", "--no-input", "-v", "0"], env)
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    import logging

    logging.disable(logging.WARNING)  # each refused or slow request's log line would bury the table


def machine() -> dict[str, Any]:
    with psycopg.connect(harness.SERVER_URL.rsplit("/", 1)[0] + "/postgres") as db:
        version = db.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        shared = db.execute("SHOW shared_buffers").fetchone()[0]  # type: ignore[index]
    return {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "postgresql": version, "shared_buffers": shared}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000_000, help="messages to write (default 10M)")
    parser.add_argument("--people", type=int, default=20_000, help="people they are spread over (default 20k)")
    parser.add_argument("--days", type=int, default=400, help="days they are spread over (default 400)")
    parser.add_argument("--database", default="bench_history", help="the database's name (dropped unless --keep)")
    parser.add_argument("--reuse", action="store_true", help="measure the history --database already holds")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--repeat", type=int, default=3, help="requests timed per page (default 3)")
    parser.add_argument("--accepts", type=int, default=200, help="messages accepted per latency measure (200)")
    parser.add_argument("--prune-seconds", type=int, default=20, help="each prune's run (default 20 s)")
    parser.add_argument("--stall-rows", type=int, default=0, help="grow deliveries to this many, then the stall test")
    parser.add_argument("--statement-seconds", type=float, default=60, help="a statement's limit (default 60)")
    parser.add_argument("--skip", default="", help="comma-separated parts not to run: pages,prunes")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args()
    url, build = database(args.database, args.reuse)
    results: dict[str, Any] = {"machine before": machine(), "command": " ".join(sys.argv)}
    try:
        history = built_history(url, args) if build else remembered_history(url)
        results["built"] = {"seconds": history["seconds"], "rows": history["rows"]}
        start_django(url)
        measures = Measures(url, history, args.repeat, int(args.statement_seconds * 1000))
        ids = measured_ids(history)
        if "pages" not in args.skip:
            measures.pages(ids)
            measures.claim()
            results["accept"] = accept_latencies(measures.api, args.accepts)
            print(f"accept: {results['accept']}", flush=True)
        if "prunes" not in args.skip:
            results["prunes"] = [prune(measures, name, code, args.prune_seconds) for name, code in PRUNES.items()]
            measures.pruned_receipts(ids)
        results["pages"] = measures.results
        if args.stall_rows:
            results["grown"] = history_build.grow_deliveries(url, args.stall_rows, history["values"])
            results["stall"] = stall(measures, url, args.accepts, args.prune_seconds * 3)
        results["machine after"] = machine()
    finally:
        if not args.keep:
            drop(url)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1, default=str)


if __name__ == "__main__":
    main()
