"""End-to-end hand-off benchmark (issue 15): gunicorn accepting messages from 1,000 users at a fixed arrival rate,
worker processes (`manage.py db_worker`, the Procfile's) handing them to an assistant runtime on 127.0.0.1 that
answers after a fixed delay. Everything on 127.0.0.1, every run bounded in time.

    .venv/bin/python -m bench.delivery --rate 300 --seconds 30 --runtime-ms 200 --workers 1 --concurrency 96

Reports accepted/s, delivered/s (deliveries finished inside the arrival window), the backlog when arrivals stop,
accept→delivered p50/p99 (messages accepted in the window), CPU-ms per accepted message (gunicorn's processes) and
per delivered one (the workers'), the workers' memory, the most attempts in flight, and how many messages the
runtime received more than once (double attempts: a lease taken over while its attempt still ran). Needs PostgreSQL
(BENCH_DATABASE_URL's server); the database it uses is created and dropped.

A runtime as slow as a tool-using assistant (issue 22: tool calls of 45 s, longer than a lease):

    .venv/bin/python -m bench.delivery --rate 1 --seconds 10 --runtime-ms 45000 --timeout-seconds 60 --workers 2 \
        --drain-seconds 70

(its warm-up is 10 messages, answered before the window opens).

``--procrastinate`` delivers through procrastinate's worker instead of ours (bench/procrastinate_delivery.py, which
also runs the two side by side). ``--backlog`` holds the worker (SIGSTOP) while the window's messages arrive and then
times how fast it delivers them, with its CPU per delivery meanwhile: the worker's capacity, when a loaded machine's
web tier accepts less than the rate offered.
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from bench import procrastinate_delivery
from bench.harness import (
    cpu_seconds,
    free_port,
    migrate,
    people_with_keys,
    rss_mb,
    runtime_process,
    scratch_database,
    service_environment,
    start,
    start_gunicorn,
    tree,
    unsettled,
    wait_settled,
    wait_until_up,
)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200, help="messages per second offered (default 200)")
    parser.add_argument("--seconds", type=float, default=60, help="arrival window (default 60)")
    parser.add_argument("--runtime-ms", type=float, default=200, help="the runtime's answer time (default 200)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--concurrency", type=int, default=64, help="DELIVERY_CONCURRENCY (default 64)")
    parser.add_argument("--recorders", type=int, default=3, help="DELIVERY_RECORDERS (default 3)")
    parser.add_argument("--users", type=int, default=1000, help="users, one key each (default 1000)")
    parser.add_argument("--web-processes", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--no-worker", action="store_true", help="accept only (the ingest-only figure)")
    parser.add_argument("--backend", default="webhook", help="ASSISTANT_BACKEND (webhook; local: no runtime)")
    parser.add_argument("--drain-seconds", type=float, default=30, help="wait this long at most for the backlog")
    parser.add_argument(
        "--timeout-seconds", type=float, default=10, help="ASSISTANT_TIMEOUT_SECONDS (default 10; above --runtime-ms)"
    )
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="hold the workers (SIGSTOP) while the window's messages arrive, then time how fast they deliver them",
    )
    parser.add_argument(
        "--procrastinate",
        action="store_true",
        help="deliver through procrastinate's worker instead of ours (bench/procrastinate_delivery.py)",
    )
    parser.add_argument("--json", metavar="PATH", help="append the result as one JSON line to PATH")
    return parser.parse_args()


# --- the runtime --------------------------------------------------------------------------------------------------


# The assistant runtime: answers each hand-over after a delay (argv 1, seconds) and appends its webhook-id (the
# message's id) to a file (argv 2), one line each.
def environment(database_url: str, runtime_url: str, args: argparse.Namespace) -> dict[str, str]:
    env = service_environment(
        database_url,
        {
            "INGEST_RATE_LIMIT": "1000000/h",
            "ASSISTANT_BACKEND": args.backend,
            "ASSISTANT_WEBHOOK_URL": runtime_url,
            "ASSISTANT_WEBHOOK_SECRET": "whsec_" + "YmVuY2htYXJrLXJ1bnRpbWUtc2hhcmVkLXNlY3JldC0zMmI=",
            "DELIVERY_CONCURRENCY": str(args.concurrency),
            "DELIVERY_RECORDERS": str(args.recorders),
            "ASSISTANT_TIMEOUT_SECONDS": str(args.timeout_seconds),
            "WEB_CONCURRENCY": str(args.web_processes),
        },
    )
    return env


# --- the load -------------------------------------------------------------------------------------------------------


class Sender(threading.local):
    connection: http.client.HTTPConnection | None = None


def offer(port: int, keys: list[str], rate: float, seconds: float) -> tuple[int, int, float]:
    """Open loop: message n is due at n / rate seconds; a pool of keep-alive connections sends them. Returns
    (accepted, refused, seconds taken)."""
    local = Sender()
    body = json.dumps({"message": "Remind me to stretch at 3pm", "context": {"source": "bench"}}).encode()
    accepted = refused = 0
    lock = threading.Lock()

    def send(n: int) -> None:
        nonlocal accepted, refused
        if local.connection is None:
            local.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {keys[n % len(keys)]}", "Content-Type": "application/json"}
        try:
            local.connection.request("POST", "/api/v1/inbound/api-message", body, headers)
            response = local.connection.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            local.connection.close()
            local.connection = None
            ok = False
        with lock:
            if ok:
                accepted += 1
            else:
                refused += 1

    total = int(rate * seconds)
    started = time.monotonic()
    with ThreadPoolExecutor(48) as pool:
        for n in range(total):
            due = started + n / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            pool.submit(send, n)
    return accepted, refused, time.monotonic() - started


def main() -> None:
    args = arguments()
    seen = Path(tempfile.mkstemp(prefix="bench-runtime-seen-")[1])
    runtime, runtime_url = runtime_process(args.runtime_ms / 1000, seen)
    processes: list[subprocess.Popen[bytes]] = [runtime]
    try:
        with scratch_database("bench_delivery") as database_url:
            env = environment(database_url, runtime_url, args)
            migrate(env)
            if args.procrastinate:
                procrastinate_delivery.install(database_url)
            keys = people_with_keys(env, args.users, "bench")
            port = free_port()
            web = start_gunicorn(env, port)
            processes.append(web)
            workers = []
            if not args.no_worker:
                command = (
                    procrastinate_delivery.worker_command(args.concurrency)
                    if args.procrastinate
                    else ["manage.py", "db_worker", "--no-reload", "--no-startup-delay"]
                )
                workers = [start(command, env) for _ in range(args.workers)]
            processes += workers
            wait_until_up(port)
            time.sleep(2)  # the workers start
            # Warm up: every web process meets keys, every worker connects (a few messages only for a slow runtime,
            # which must be answered before the window opens).
            slow = args.runtime_ms >= 10_000
            offer(port, keys, rate=5 if slow else 50, seconds=2)
            with psycopg.connect(database_url, autocommit=True) as db:
                wait_drained(db, args.runtime_ms / 1000 + 20 if slow else 30)
                db.execute("DELETE FROM conversations_delivery; DELETE FROM conversations_message;")
                web_pids = tree(web.pid)
                worker_pids = [pid for w in workers for pid in tree(w.pid)]
                idle_rss = [sum(rss_mb(pid) for pid in tree(w.pid)) for w in workers]
                web_cpu, worker_cpu = cpu_seconds(web_pids), cpu_seconds(worker_pids)
                peak_in_flight = [0]
                stop = threading.Event()
                watcher = threading.Thread(target=watch_in_flight, args=(database_url, peak_in_flight, stop))
                watcher.start()
                if args.backlog:
                    signal_all(worker_pids, signal.SIGSTOP)
                t0 = db.execute("SELECT now()").fetchone()[0]
                accepted, refused, took = offer(port, keys, args.rate, args.seconds)
                t1 = db.execute("SELECT now()").fetchone()[0]
                web_cpu = cpu_seconds(web_pids) - web_cpu
                worker_cpu_window = cpu_seconds(worker_pids) - worker_cpu
                drain = drain_backlog(db, worker_pids, args.drain_seconds) if args.backlog else {}
                stop.set()
                watcher.join()
                loaded_rss = [sum(rss_mb(pid) for pid in tree(w.pid)) for w in workers]
                backlog = unsettled(db)
                delivered_in_window = db.execute(
                    "SELECT count(*) FROM conversations_delivery WHERE status = 'delivered' AND finished_at <= %s",
                    [t1],
                ).fetchone()[0]
                drained = wait_drained(db, args.drain_seconds) if workers else False
                p50, p99 = db.execute(
                    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.99) WITHIN GROUP "
                    "(ORDER BY s) FROM (SELECT extract(epoch FROM finished_at - created_at) * 1000 AS s "
                    "FROM conversations_delivery WHERE status = 'delivered' AND created_at BETWEEN %s AND %s) x",
                    [t0, t1],
                ).fetchone()
                # Where the time goes: waiting to be claimed (accepted → claimed) and the attempt itself (claimed →
                # recorded: the runtime's answer, the network, the worker's threads and the recorder).
                wait50, attempt50, attempt99 = db.execute(
                    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w), percentile_cont(0.5) WITHIN GROUP "
                    "(ORDER BY a), percentile_cont(0.99) WITHIN GROUP (ORDER BY a) FROM (SELECT "
                    "extract(epoch FROM started_at - created_at) * 1000 AS w, "
                    "extract(epoch FROM finished_at - started_at) * 1000 AS a "
                    "FROM conversations_delivery WHERE status = 'delivered' AND created_at BETWEEN %s AND %s) x",
                    [t0, t1],
                ).fetchone()
                window = (t1 - t0).total_seconds()
                most_attempts = db.execute("SELECT coalesce(max(attempts), 0) FROM conversations_delivery").fetchone()
                delivered_total, total = db.execute(
                    "SELECT count(*) FILTER (WHERE status = 'delivered'), count(*) FROM conversations_delivery"
                ).fetchone()
            handed = [line for line in seen.read_text().splitlines() if line]
            result = {
                "rate": args.rate,
                "seconds": args.seconds,
                "runtime_ms": args.runtime_ms,
                "backend": args.backend,
                "queue": "procrastinate" if args.procrastinate else "database",
                "workers": 0 if args.no_worker else args.workers,
                "concurrency": args.concurrency,
                "recorders": args.recorders,
                "users": args.users,
                "accepted_per_s": round(accepted / window, 1),
                "refused": refused,
                "delivered_per_s": round(delivered_in_window / window, 1),
                "backlog_at_end": backlog,
                "drained_after": drained,
                "latency_p50_ms": None if p50 is None else round(p50),
                "latency_p99_ms": None if p99 is None else round(p99),
                "wait_p50_ms": None if wait50 is None else round(wait50),
                "attempt_p50_ms": None if attempt50 is None else round(attempt50),
                "attempt_p99_ms": None if attempt99 is None else round(attempt99),
                "web_cpu_ms_per_accepted": round(web_cpu * 1000 / max(accepted, 1), 2),
                "worker_cpu_ms_per_delivered": round(worker_cpu_window * 1000 / max(delivered_in_window, 1), 2)
                if workers
                else None,
                "worker_rss_mb_idle": [round(r) for r in idle_rss],
                "worker_rss_mb_loaded": [round(r) for r in loaded_rss],
                "peak_in_flight": peak_in_flight[0],
                "double_attempts": len(handed) - len(set(handed)),
                "most_attempts": most_attempts[0],
                "delivered_of_all": f"{delivered_total}/{total}",
                "offer_seconds": round(took, 1),
                "loadavg": os.getloadavg(),
                **drain,
            }
            print(json.dumps(result))
            if args.json:
                with open(args.json, "a") as out:
                    out.write(json.dumps(result) + "\n")
    finally:
        seen.unlink(missing_ok=True)
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def signal_all(pids: list[int], number: int) -> None:
    for pid in pids:
        os.kill(pid, number)


def drain_backlog(db: psycopg.Connection[Any], worker_pids: list[int], seconds: float) -> dict[str, Any]:
    """--backlog: the workers, stopped (SIGSTOP) while the window's messages were accepted, continue; how fast they
    deliver that backlog, and their CPU per delivery meanwhile (the worker's capacity, whatever the web tier
    managed to accept on a loaded machine)."""
    backlog = unsettled(db)
    cpu_before = cpu_seconds(worker_pids)
    resumed = db.execute("SELECT now()").fetchone()[0]
    signal_all(worker_pids, signal.SIGCONT)
    took = wait_settled(db, seconds, poll=0.1)
    cpu = cpu_seconds(worker_pids) - cpu_before
    delivered, last = db.execute(
        "SELECT count(*), max(finished_at) FROM conversations_delivery WHERE status = 'delivered' AND finished_at > %s",
        [resumed],
    ).fetchone()
    span = (last - resumed).total_seconds() if last else None
    return {
        "backlog_at_resume": backlog,
        "backlog_delivered": delivered,
        "backlog_drained_after": None if took is None else round(took, 2),
        "drain_delivered_per_s": round(delivered / span, 1) if span else None,
        "drain_worker_cpu_ms_per_delivered": round(cpu * 1000 / max(delivered, 1), 2),
    }


def watch_in_flight(database_url: str, peak: list[int], stop: threading.Event) -> None:
    with psycopg.connect(database_url, autocommit=True) as db:
        while not stop.wait(0.5):
            now = db.execute("SELECT count(*) FROM conversations_delivery WHERE status = 'processing'").fetchone()[0]
            peak[0] = max(peak[0], now)


def wait_drained(db: psycopg.Connection[Any], seconds: float) -> float | bool:
    """Seconds until nothing is queued or in flight (False: not within ``seconds``)."""
    took = wait_settled(db, seconds, poll=0.5)
    return False if took is None else round(took, 1)


if __name__ == "__main__":
    main()
