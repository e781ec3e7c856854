"""`make bench`: gunicorn over PostgreSQL and Redis, driven by wrk, beside a bare one-INSERT Django view.

Every load run is bounded in time (--seconds per cell) and stops by itself. Results go to docs/benchmarks.md
(between its generated markers), docs/benchmarks/results.json and docs/benchmarks/throughput-p99.png.
"""

import argparse
import json
import logging
import os
import platform
import secrets
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.load import Scenario, run_wrk, wrk_binary
from bench.server import ROOT, Server

BODY_FILE = Path(__file__).resolve().parent / "body.json"
DOCS = ROOT / "docs"
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5, help="length of each load run (default 5)")
    parser.add_argument("--connections", default="1,8,32,64", help="comma-separated connection counts")
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs per cell, interleaved; the cell shows the median (default 1)"
    )
    parser.add_argument("--only", default="", help="comma-separated scenario names to run (default: all)")
    parser.add_argument("--gunicorn-arg", action="append", default=[], help="extra gunicorn argument (repeatable)")
    parser.add_argument("--no-docs", action="store_true", help="print results only; leave docs/ alone")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--load-only", action="store_true", help="skip the in-process measurements (for quick comparisons; no docs)"
    )
    parser.add_argument(
        "--profile",
        metavar="SCENARIO",
        help="instead of the table: sample every worker with py-spy while SCENARIO runs at 32 connections "
        "(writes collapsed stacks to /tmp/bench-profile.txt and prints the hottest frames)",
    )
    return parser.parse_args()


def service_environment() -> dict[str, str]:
    """Production-like: DEBUG off, PostgreSQL, Redis; the benchmark settings only add the baseline route."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DEBUG": "0",
        "HTTPS_ONLY": "0",  # plain HTTP on 127.0.0.1 (in production the router terminates TLS in front)
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        # The load comes from one key and one address: limits high enough never to refuse it, so every request
        # still pays for its counting (the cache round trips) but the measured path stays the accepted one.
        "INGEST_RATE_LIMIT": "1000000000/m",
        # Production's hand-off: a task row in PostgreSQL, committed with the message, run later by db_worker.
        "TASK_BACKEND": "database",
        "AUTH_FAILURE_RATE_LIMIT": "1000000000/m",
    }
    os.environ.update(env)
    return env


def recreate_database() -> None:
    import psycopg
    from psycopg import sql

    url = DATABASE_URL.rsplit("/", 1)
    name = url[1]
    if "bench" not in name:
        raise SystemExit(f"Refusing to drop {name!r}: the benchmark database's name must contain 'bench'.")
    with psycopg.connect(url[0] + "/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def silence_logs() -> None:
    """This process serves requests too (to count their SQL and work); its log lines would bury the results."""
    for handler in logging.getLogger().handlers + logging.getLogger("access").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 (for the life of the process)


def prepare_data() -> dict[str, str]:
    """Migrate, then one user with a profile, a V2 and a V1 key; returns the keys and what the baseline writes to."""
    import django
    from django.core.cache import cache
    from django.core.management import call_command

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User

    from keys import tokens
    from keys.models import Generation
    from keys.services import create_key

    silence_logs()
    call_command("migrate", verbosity=0)
    cache.clear()  # our own Redis database only: rate-limit counters from an earlier run
    user = User.objects.create_user("bench@example.com", "bench@example.com")
    user.profile.phone_number = "+14155551234"
    user.profile.save()
    v2_key, v2 = create_key(user, "bench v2", Generation.V2)
    _, v1 = create_key(user, "bench v1", Generation.V1)
    unknown = tokens.generate(Generation.V2)  # well-formed, checksum right, but never stored
    # The servers read these from the environment; this process has loaded its settings already.
    os.environ["BENCH_CONVERSATION_ID"] = str(user.conversation.pk)
    os.environ["BENCH_API_KEY_ID"] = str(v2_key.pk)
    settings.BENCH_CONVERSATION_ID, settings.BENCH_API_KEY_ID = user.conversation.pk, v2_key.pk
    return {"v2": v2, "v1": v1, "unknown": unknown}


def scenarios(keys: dict[str, str]) -> list[Scenario]:
    current, legacy = "/api/v1/inbound/api-message", "/api/v1/inbound-sms/webhook"
    return [
        Scenario("current (V2 key)", current, f"Bearer {keys['v2']}", 200, accepted=True),
        Scenario("idempotent (V2 key, Idempotency-Key)", current, f"Bearer {keys['v2']}", 200, True, True),
        Scenario("legacy (V1 key)", legacy, f"Bearer {keys['v1']}", 200, accepted=True),
        Scenario("refused: unknown key", current, f"Bearer {keys['unknown']}", 401, accepted=False),
        Scenario("refused: malformed key", current, "Bearer psk_not-a-key", 401, accepted=False),
        Scenario("baseline", "/bench/baseline", None, 200, accepted=True),
    ]


def check_answers(url: str, scenario: Scenario) -> None:
    """One request before the load: a scenario that answers the wrong status would measure the wrong thing."""
    headers = {"Content-Type": "application/json"}
    if scenario.idempotency_keys:
        headers["Idempotency-Key"] = f"check-{time.time_ns()}"
    if scenario.authorization:
        headers["Authorization"] = scenario.authorization
    request = urllib.request.Request(url + scenario.path, data=BODY_FILE.read_bytes(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, text = response.status, response.read()[:300]
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()[:300]
    if status != scenario.expected_status:
        raise SystemExit(f"{scenario.name}: expected {scenario.expected_status}, got {status}: {text!r}")


def count_queries(all_scenarios: list[Scenario]) -> dict[str, dict[str, Any]]:
    """Per scenario, in this process with the server's settings: its SQL, its Python calls, its database CPU."""
    from bench.measure import database_cpu_per_request, python_calls_per_request, queries_of_request

    body = json.loads(BODY_FILE.read_text())
    counted = {}
    for scenario in all_scenarios:
        if scenario.idempotency_keys:
            continue  # counted in-process without the header; docs/benchmarks.md has its statements
        q = queries_of_request(scenario.path, body, scenario.authorization)
        database_cpu = database_cpu_per_request(scenario.path, body, scenario.authorization)
        counted[scenario.name] = {
            "status": q.status,
            "statements": q.statements,
            "work": q.work,
            "python_calls": python_calls_per_request(scenario.path, body, scenario.authorization),
            "database_cpu_us": None if database_cpu is None else database_cpu * 1e6,
        }
    return counted


def machine(load_before: str) -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": pages / 2**30, "load_before": load_before}


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def versions() -> dict[str, str]:
    from django.db import connection

    found = {"Python": platform.python_version()}
    for package in ("Django", "djangorestframework", "gunicorn", "psycopg"):
        found[package] = metadata.version(package)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        found["PostgreSQL"] = cursor.fetchone()[0].split()[0]
    import redis

    found["Redis"] = redis.Redis.from_url(REDIS_URL).info("server")["redis_version"]
    found["wrk"] = subprocess.run([wrk_binary(), "-v"], capture_output=True, text=True).stdout.split()[1]
    return found


def main() -> None:
    args = arguments()
    connection_counts = [int(c) for c in args.connections.split(",")]
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load_before = load_average()
    env = service_environment()
    wrk_binary()
    recreate_database()
    keys = prepare_data()
    env.update({k: os.environ[k] for k in ("BENCH_CONVERSATION_ID", "BENCH_API_KEY_ID")})
    chosen = [s for s in scenarios(keys) if not args.only or s.name.split()[0].rstrip(":") in args.only.split(",")]

    from bench.measure import key_check_costs

    key_check: dict[str, Any] = {"seconds_per_check": {}, "pbkdf2_over_ours": 0}
    queries: dict[str, dict[str, Any]] = {}
    if not args.load_only:
        print("key check micro-benchmark …", flush=True)
        key_check = key_check_costs()
        print("queries, Python calls and database CPU per request …", flush=True)
        queries = count_queries(scenarios(keys))

    log = Path(os.environ.get("BENCH_LOG", "/tmp/bench-gunicorn.log"))
    server = Server(env, args.gunicorn_arg, log)
    runs: list[dict[str, Any]] = []
    every_round: list[dict[str, Any]] = []  # every run, not only each cell's median (bench/ab.py reads them)
    try:
        server.wait_ready("/api/")
        for scenario in chosen:
            check_answers(server.url, scenario)
        for scenario in chosen:  # warm every worker's code paths and connections
            run_wrk(server.url, scenario, BODY_FILE, 8, 1)
        if args.profile:
            from bench.profile import profile_scenario

            target = next(s for s in chosen if s.name.startswith(args.profile))
            profile_scenario(server, target, BODY_FILE, args.seconds)
            return
        for connections in connection_counts:
            rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in chosen}
            for _ in range(args.rounds):  # interleaved, so a burst of other load hits every scenario alike
                for order, scenario in enumerate(chosen):
                    run = run_wrk(server.url, scenario, BODY_FILE, connections, args.seconds)
                    rounds[scenario.name].append({**run.as_dict(), "order": order})
                    every_round.append(rounds[scenario.name][-1])
                    print(
                        f"{scenario.name:24} c={connections:<3} {run.rps:8.0f} req/s  p50 {run.p50_ms:6.2f}  "
                        f"p95 {run.p95_ms:6.2f}  p99 {run.p99_ms:7.2f} ms  non-2xx {run.non_2xx}  "
                        f"socket errors {run.socket_errors}",
                        flush=True,
                    )
            for measured in rounds.values():  # each cell: the round with the median throughput
                runs.append(sorted(measured, key=lambda r: r["rps"])[len(measured) // 2])
    finally:
        server.stop()

    result = {
        "started_at": started_at,
        "seconds_per_run": args.seconds,
        "rounds": args.rounds,
        "command": "make bench" + (f" BENCH_ARGS={shlex.quote(' '.join(sys.argv[1:]))}" if sys.argv[1:] else ""),
        "machine": {**machine(load_before), "load_after": load_average()},
        "versions": versions(),
        "server": {
            # As an operator would type it: no absolute paths, no ephemeral port.
            "command": [
                Path(server.command[0]).name,
                *(a.replace(f"{ROOT}/", "").replace(str(server.port), "PORT") for a in server.command[1:]),
            ],
            "workers": len(server.peak_rss_kib),
            "threads_per_worker": max(server.threads_per_worker.values(), default=0),
            "peak_rss_mib_per_worker": [kib / 1024 for kib in server.peak_rss_kib.values()],
        },
        "runs": runs,
        "every_round": every_round,
        "queries": queries,
        "key_check": key_check,
    }
    print(json.dumps({k: result[k] for k in ("machine", "server", "key_check")}, indent=2, default=str))
    from bench import report

    print(report.queries_table(queries))
    print(report.results_table(runs))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.no_docs or args.load_only:
        return
    (DOCS / "benchmarks").mkdir(parents=True, exist_ok=True)
    (DOCS / "benchmarks" / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    report.plot(runs, DOCS / "benchmarks" / "throughput-p99.png")
    report.write_markdown(DOCS / "benchmarks.md", report.markdown(result, "throughput-p99.png"))
    print(f"wrote {DOCS / 'benchmarks.md'} and docs/benchmarks/", flush=True)


if __name__ == "__main__":
    main()
