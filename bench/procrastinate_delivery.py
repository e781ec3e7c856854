"""A library queue beside ours (issue 33, "library before our own code"): the same deliveries, handed to the same
stand-in runtime, through procrastinate (a PostgreSQL job queue: https://procrastinate.readthedocs.io) instead of
the delivery engine, measured side by side with it in one run by `bench.delivery`.

    .venv/bin/python -m bench.procrastinate_delivery --rounds 3 --seconds 10 --rate 700 --concurrency 192 \\
        --json docs/benchmarks/procrastinate-<date>.jsonl

runs `bench.delivery` (gunicorn accepting, one worker, the runtime answering after 200 ms) alternately with our
worker (`manage.py db_worker`) and with procrastinate's (this module's ``worker``), the order swapped every round,
and prints each run's delivered/s and worker CPU per delivered message, and procrastinate's over ours.

How procrastinate is set up, as its documentation says (its how-to pages advanced/locks, advanced/queueing_locks,
production/retry_stalled_jobs and production/concurrency):

- **One job per delivery**, written in the same transaction as the delivery: a trigger on the delivery table calls
  procrastinate's own ``procrastinate_defer_jobs_v1`` for every new row, as the accept statement would if the
  service adopted it (the web processes do no more work than today; PostgreSQL does the job's insert, its event row
  and its NOTIFY). ``lock`` = the thread (a thread's jobs run one at a time, oldest first); ``queueing_lock`` = the
  delivery (at most one waiting job per delivery: deferring it twice is refused).
- **The job** does what the in-process task does (delivery/tasks.py): our claim of a delivery (the request to
  send, the attempt counted, the row held), the attempt as the engine makes it (delivery/engine.py), our record of
  the outcome, the connection back to the pool while the runtime answers; a transient failure raises
  ``RetryLater`` and procrastinate retries the job when the delivery is due again.
- **One worker**, ``concurrency`` jobs at a time. A synchronous job runs on the event loop's default thread pool
  (asgiref's ``sync_to_async``), which Python sizes min(32, CPUs + 4): 6 threads here. So the worker sets a pool
  of ``concurrency`` threads, else it would run 6 attempts at a time whatever ``concurrency`` says. Django's
  connections come from a pool of DATABASE_POOL_SIZE (4).
- **Stalled jobs** (a worker killed with its jobs in ``doing``): each worker's heartbeat every 10 s; the periodic
  task of the docs, every 10 s here instead of every 10 minutes, retries the jobs of workers silent for 30 s.
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

QUEUE = "deliveries"
TASK = "deliver"

# One job per new delivery, in the inserting transaction, through procrastinate's own defer function.
DEFER_ON_INSERT = """
CREATE FUNCTION bench_defer_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM procrastinate_defer_jobs_v1(ARRAY[ROW(
        '{queue}', '{task}', 0, 'thread:' || NEW.conversation_id, 'delivery:' || NEW.id,
        jsonb_build_object('delivery_id', NEW.id), NULL::timestamptz
    )]::procrastinate_job_to_defer_v1[]);
    RETURN NEW;
END;
$$;
CREATE TRIGGER bench_defer_delivery AFTER INSERT ON conversations_delivery
    FOR EACH ROW WHEN (NEW.status = 'queued') EXECUTE FUNCTION bench_defer_delivery();
"""


def schema() -> list[str]:
    """What `install` runs: procrastinate's schema, then the trigger that defers a job per delivery."""
    from procrastinate.schema import SchemaManager

    return [SchemaManager.get_schema(), DEFER_ON_INSERT.format(queue=QUEUE, task=TASK)]


def install(database_url: str) -> None:
    """procrastinate's schema and the trigger, in the (migrated) database at ``database_url``."""
    with psycopg.connect(database_url, autocommit=True) as db:
        for sql in schema():
            db.execute(sql.encode())


def worker_command(concurrency: int) -> list[str]:
    """The worker process, for `bench.delivery --procrastinate`."""
    return ["-m", "bench.procrastinate_delivery", "worker", "--concurrency", str(concurrency)]


# --- the worker ------------------------------------------------------------------------------------------------------


class RetryLater(Exception):
    """The attempt failed for now: the delivery is queued again, due at ``due``."""

    def __init__(self, due: datetime | None) -> None:
        super().__init__(f"due again at {due}")
        self.due = due


def build_app(database_url: str) -> Any:
    """The procrastinate app, its delivery task and the docs' stalled-job retry (Django must be set up)."""
    import procrastinate
    from django.db import connection
    from django.utils import timezone

    from conversations.models import Delivery
    from delivery import lifecycle, queue
    from delivery.engine import DELIVERIES
    from delivery.queue_worker import settle

    class WhenDue(procrastinate.BaseRetryStrategy):
        """Retry a RetryLater when its delivery is due; any other error is not retried (our record already
        decided: failed for good)."""

        def get_retry_decision(self, *, exception: BaseException, job: Any) -> Any:
            if isinstance(exception, RetryLater):
                return procrastinate.RetryDecision(retry_at=exception.due)
            return None

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=database_url))

    @app.task(name=TASK, queue=QUEUE, retry=WhenDue())
    def deliver(delivery_id: int) -> str:
        """One attempt, by the engine's claim, attempt and settle (delivery/engine.py), the lock keeping the thread's
        order. The claim takes the first claimable delivery, which is this job's unless another job's came first:
        a job that found nothing while its own delivery still waits tries again shortly."""
        try:
            claims = queue.claim(1, lease_seconds=lifecycle.unrenewed_lease_seconds())
        finally:
            connection.close()  # back to the pool while the runtime answers
        if not claims:
            waiting = Delivery.objects.filter(pk=delivery_id, status__in=["queued", "processing"]).exists()
            connection.close()
            if waiting:
                raise RetryLater(timezone.now() + timedelta(seconds=0.1))
            return "skipped"
        try:
            status = settle(DELIVERIES, DELIVERIES.attempt(claims[0]))
            if status == "retried":
                due = Delivery.objects.filter(pk=claims[0].delivery_id).values_list("next_attempt_at", flat=True)[0]
                raise RetryLater(due)
        finally:
            connection.close()
        return status

    # procrastinate's how-to production/retry_stalled_jobs, every 10 s (a sixth cron column) instead of 10 minutes.
    @app.periodic(cron="* * * * * */10")
    @app.task(queueing_lock="retry_stalled_jobs", pass_context=True)
    async def retry_stalled_jobs(context: Any, timestamp: int) -> None:
        for job in await app.job_manager.get_stalled_jobs():
            await app.job_manager.retry_job(job)

    return app


async def run_worker(app: Any, concurrency: int) -> None:
    # Synchronous jobs run on the loop's default executor: as many threads as jobs at a time (see the module).
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(concurrency, thread_name_prefix="job"))
    async with app.open_async():
        await app.run_worker_async(concurrency=concurrency, shutdown_graceful_timeout=20)


def worker(concurrency: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DATABASE_POOL_SIZE", "4")
    import django

    django.setup()
    asyncio.run(run_worker(build_app(os.environ["DATABASE_URL"]), concurrency))


# --- one fetch against one deep lock -------------------------------------------------------------------------------


CUT_MS = 30_000  # a fetch taking longer is cut (reported as None)


def fetch_against_depth(depths: list[int], repeats: int = 5) -> list[dict[str, Any]]:
    """procrastinate's fetch (``procrastinate_fetch_job_v2``) with ``depth`` jobs waiting behind a running one of
        the same lock (one thread's backlog) and one ready job of another lock: the median ms of ``repeats`` fetches,
        each rolled back (the same question bench/claim_depth.py asks of our claim); None when more than half were cut
    at CUT_MS."""
    from procrastinate.schema import SchemaManager

    from bench.harness import scratch_database

    found = []
    with scratch_database("bench_procrastinate_fetch") as url, psycopg.connect(url, autocommit=True) as db:
        db.execute(SchemaManager.get_schema().encode())
        worker_id = db.execute("SELECT procrastinate_register_worker_v1()").fetchone()[0]
        db.execute(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, status) VALUES ('q', 't', 'deep', 'doing')"
        )
        queued = 0
        for depth in sorted(depths):
            db.execute(
                "INSERT INTO procrastinate_jobs (queue_name, task_name, lock) "
                "SELECT 'q', 't', 'deep' FROM generate_series(1, %s)",
                [depth - queued],
            )
            queued = depth
            db.execute("DELETE FROM procrastinate_jobs WHERE lock = 'other'")
            db.execute("INSERT INTO procrastinate_jobs (queue_name, task_name, lock) VALUES ('q', 't', 'other')")
            db.execute("ANALYZE procrastinate_jobs")
            times: list[float | None] = []
            for _ in range(repeats):
                started = time.perf_counter()
                try:
                    with db.transaction(force_rollback=True):
                        db.execute(f"SET LOCAL statement_timeout = {CUT_MS}")
                        sql = "SELECT lock FROM procrastinate_fetch_job_v2(NULL, %s)"
                        job = db.execute(sql, [worker_id]).fetchone()
                        assert job is not None and job[0] == "other"
                        times.append((time.perf_counter() - started) * 1000)
                except psycopg.errors.QueryCanceled:
                    times.append(None)  # cut
            done = sorted(t for t in times if t is not None)
            median = None if len(done) <= repeats // 2 else round(done[repeats // 2], 2)
            found.append({"depth": depth, "fetch_ms_median": median, "cut_at_ms": CUT_MS})
            print(json.dumps(found[-1]), flush=True)
    return found


# --- kill -9 and SIGTERM of its worker -------------------------------------------------------------------------------

RECORD = """
import json
from django.contrib.auth import get_user_model
from conversations.models import Endpoint
from ingestion.hotpath.recording import record_user_message
from keys.models import ApiKey
user = get_user_model().objects.get(username="%s")
key = ApiKey.objects.filter(owner=user).first()
made = [record_user_message(user=user, endpoint=Endpoint.CURRENT, text=f"m{n}", api_key=key) for n in range(%d)]
print(json.dumps([m.delivery.pk for m in made]))
"""


def kill_check(runtime_seconds: float) -> dict[str, Any]:
    """Two messages of one thread, the runtime answering after ``runtime_seconds``: the worker is killed (-9) while
    the first is being attempted and another started at once; how long until the stalled-job retry puts the job
    back, and how the jobs and deliveries end. Then a message of another thread and SIGTERM mid-attempt (the
    worker's shutdown_graceful_timeout is 20 s): how long the worker takes to exit, and the job's end. Every wait
    gives up after a few minutes."""
    from bench.harness import (
        migrate,
        people_with_keys,
        run_python,
        runtime_process,
        scratch_database,
        service_environment,
        start,
    )

    def jobs(db: psycopg.Connection[Any]) -> list[Any]:
        sql = "SELECT id, status, attempts FROM procrastinate_jobs WHERE task_name = %s ORDER BY id"
        return db.execute(sql, [TASK]).fetchall()

    def wait_for(db: psycopg.Connection[Any], done: Any, seconds: float) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            if done(jobs(db)):
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)
        return None

    seen = Path(tempfile.mkstemp(prefix="bench-kill-seen-")[1])
    runtime, url = runtime_process(runtime_seconds, seen)
    found: dict[str, Any] = {"runtime_seconds": runtime_seconds, "loadavg_before": os.getloadavg()}
    try:
        with scratch_database("bench_procrastinate_kill") as database_url:
            secret = "whsec_" + "YmVuY2htYXJrLXJ1bnRpbWUtc2hhcmVkLXNlY3JldC0zMmI="
            env = service_environment(
                database_url,
                {
                    "ASSISTANT_BACKEND": "webhook",
                    "ASSISTANT_WEBHOOK_URL": url,
                    "ASSISTANT_WEBHOOK_SECRET": secret,
                    "ASSISTANT_TIMEOUT_SECONDS": str(runtime_seconds + 30),  # the attempt waits for the answer
                },
            )
            migrate(env)
            install(database_url)
            people_with_keys(env, 2, "kill")
            run_python(RECORD % ("kill0", 2), env)
            with psycopg.connect(database_url, autocommit=True) as db:
                first = start(worker_command(4), env)
                wait_for(db, lambda rows: rows[0][1] == "doing" and seen.read_text(), 60)
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
                killed = time.monotonic()
                second = start(worker_command(4), env)
                found["retried_after_kill_s"] = wait_for(db, lambda rows: rows[0][2] >= 1, 300)
                wait_for(db, lambda rows: all(row[1] in ("succeeded", "failed") for row in rows), 300)
                found["jobs_settled_after_kill_s"] = round(time.monotonic() - killed, 1)
                found["jobs_after_kill"] = jobs(db)
                found["deliveries_after_kill"] = db.execute(
                    "SELECT id, status, attempts FROM conversations_delivery ORDER BY id"
                ).fetchall()
                found["runtime_handed"] = len(seen.read_text().split())
                run_python(RECORD % ("kill1", 1), env)  # a thread of its own
                wait_for(db, lambda rows: rows[-1][1] == "doing", 60)
                time.sleep(1)
                stopped = time.monotonic()
                os.killpg(second.pid, signal.SIGTERM)
                try:
                    second.wait(timeout=runtime_seconds + 60)
                    found["exited_after_sigterm_s"] = round(time.monotonic() - stopped, 1)
                except subprocess.TimeoutExpired:
                    os.killpg(second.pid, signal.SIGKILL)
                    found["exited_after_sigterm_s"] = None
                found["job_after_sigterm"] = jobs(db)[-1]
    finally:
        runtime.kill()
        seen.unlink(missing_ok=True)
    found["loadavg_after"] = os.getloadavg()
    return found


# --- side by side ----------------------------------------------------------------------------------------------------

FIGURES = ["accepted_per_s", "delivered_per_s", "worker_cpu_ms_per_delivered", "latency_p50_ms", "latency_p99_ms"]
BACKLOG_FIGURES = ["accepted_per_s", "backlog_at_resume", "drain_delivered_per_s", "drain_worker_cpu_ms_per_delivered"]


def one_run(args: argparse.Namespace, procrastinate: bool) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as output:
        command = [
            sys.executable, "-m", "bench.delivery", "--rate", str(args.rate), "--seconds", str(args.seconds),
            "--runtime-ms", str(args.runtime_ms), "--concurrency", str(args.concurrency), "--users", str(args.users),
            "--drain-seconds", str(args.drain_seconds), "--json", output.name,
        ]  # fmt: skip
        if procrastinate:
            command.append("--procrastinate")
        if args.backlog:
            command.append("--backlog")
        subprocess.run(command, check=True, timeout=900, stdout=subprocess.DEVNULL)
        return dict(json.loads(Path(output.name).read_text().splitlines()[-1]))


def side_by_side(args: argparse.Namespace) -> None:
    figures = BACKLOG_FIGURES if args.backlog else FIGURES
    lines = []
    ours_runs, theirs_runs = [], []
    for n in range(args.rounds):
        order = [False, True] if n % 2 == 0 else [True, False]
        for procrastinate in order:
            run = {"round": n + 1, "uptime_before": os.getloadavg(), **one_run(args, procrastinate)}
            (theirs_runs if procrastinate else ours_runs).append(run)
            print(json.dumps({f: run.get(f) for f in ["round", "queue", *figures, "loadavg"]}), flush=True)
            lines.append(json.dumps(run))
    summary: dict[str, Any] = {"rounds": args.rounds, "backlog": args.backlog, "procrastinate_over_ours": {}}
    for figure in figures:
        ours = sum(r[figure] or 0 for r in ours_runs) / len(ours_runs)
        theirs = sum(r[figure] or 0 for r in theirs_runs) / len(theirs_runs)
        summary["procrastinate_over_ours"][figure] = round(theirs / ours, 2) if ours else None
        summary[f"ours_mean_{figure}"] = round(ours, 2)
        summary[f"procrastinate_mean_{figure}"] = round(theirs, 2)
    print(json.dumps(summary))
    lines.append(json.dumps(summary))
    if args.json:
        with open(args.json, "a") as out:
            out.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("worker", help="run procrastinate's worker (what bench.delivery --procrastinate starts)")
    run.add_argument("--concurrency", type=int, default=64)
    depth = sub.add_parser("fetch-depth", help="time one fetch against one lock's backlog of each depth")
    depth.add_argument("--depths", default="1000,10000,100000")
    kill = sub.add_parser("kill-check", help="kill -9 and SIGTERM its worker mid-attempt; what becomes of the jobs")
    kill.add_argument("--runtime-seconds", type=float, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each one run of either (default 3)")
    parser.add_argument("--seconds", type=float, default=10, help="each run's arrival window (default 10)")
    parser.add_argument("--rate", type=float, default=700, help="messages per second offered (default 700)")
    parser.add_argument("--runtime-ms", type=float, default=200, help="the runtime's answer time (default 200)")
    parser.add_argument("--concurrency", type=int, default=192, help="attempts in flight, both workers (default 192)")
    parser.add_argument("--users", type=int, default=1000, help="users, one key and one thread each (default 1000)")
    parser.add_argument("--drain-seconds", type=float, default=60, help="wait this long at most for the backlog")
    parser.add_argument(
        "--backlog", action="store_true", help="hold each worker while the messages arrive, then time its drain"
    )
    parser.add_argument("--json", metavar="PATH", help="append each run and the summary as JSON lines")
    args = parser.parse_args()
    if args.command == "worker":
        worker(args.concurrency)
    elif args.command == "kill-check":
        result = kill_check(args.runtime_seconds)
        print(json.dumps(result, default=str))
        if args.json:
            with open(args.json, "a") as out:
                out.write(json.dumps({"kill_check": result}, default=str) + "\n")
    elif args.command == "fetch-depth":
        results = fetch_against_depth([int(d) for d in args.depths.split(",")])
        if args.json:
            with open(args.json, "a") as out:
                out.write(json.dumps({"fetch_against_depth": results, "loadavg": os.getloadavg()}) + "\n")
    else:
        side_by_side(args)


if __name__ == "__main__":
    main()
