"""What a webhook trigger's delivery log (ingestion/trigger_log.py) costs, side by side with the log switched off,
in one process with the server's settings (PostgreSQL, Redis), through Django's whole request handling:

1. An accepted firing: the SQL statements it sends, Python calls (cProfile), PostgreSQL CPU, and wall time; the
   time in rounds of ``--requests`` firings alternating log on and log off, so that other load on the shared
   machine falls on both alike (ratio per pair of rounds, median). The log is kept at its steady state first (100
   lines: every firing then also trims one).
2. A flood of wrong tokens against the trigger's URL: the same, plus the database writes the log made.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/<you>_bench BENCH_REDIS_URL=redis://127.0.0.1:6379/<n> \\
    .venv/bin/python -m bench.trigger_log --requests 300 --rounds 6 --json /tmp/trigger-log.json

The last run recorded: docs/benchmarks/trigger-log-2026-11-25.json (docs/benchmarks.md, "Webhook trigger log").
Recreates the benchmark database (its name must contain "bench") and empties the Redis database it is given.
Bounded: ``--rounds`` x 2 x ``--requests`` requests per scenario.
"""

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import run as harness

PAYLOAD = {
    "ref": "refs/heads/main",
    "repository": {"full_name": "acme/shop"},
    "pusher": {"name": "sam"},
    "commits": [{"id": "4f2c"}],
    "head_commit": {"message": "Fix the checkout"},
}


def _switch(on: bool) -> None:
    from ingestion import trigger_log

    trigger_log.ENABLED = on


def _timed_round(client: Any, path: str, data: str, authorization: str, requests: int, expected: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        status = client.post(
            path, data=data, content_type="application/json", headers={"Authorization": authorization}
        ).status_code
        if status != expected:
            raise SystemExit(f"{path}: expected {expected}, got {status}")
    return (time.perf_counter() - started) / requests


def measure(name: str, path: str, authorization: str, expected: int, requests: int, rounds: int) -> dict[str, Any]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.measure import database_cpu_per_request, python_calls_per_request, queries_of_request
    from ingestion.models import TriggerFiring

    result: dict[str, Any] = {}
    for label, on in (("log on", True), ("log off", False)):
        _switch(on)
        counted = queries_of_request(path, PAYLOAD, authorization)
        assert counted.status == expected, counted.status
        cpu = database_cpu_per_request(path, PAYLOAD, authorization, requests=100)
        result[label] = {
            "statements": len(counted.work),
            "sql": [statement[:160] for statement in counted.work],
            "python_calls": python_calls_per_request(path, PAYLOAD, authorization),
            "database_cpu_us": None if cpu is None else round(cpu * 1e6, 1),
        }
    client, data = Client(HTTP_HOST="127.0.0.1"), json.dumps(PAYLOAD)
    seconds: dict[str, list[float]] = {"log on": [], "log off": []}
    for number in range(rounds):
        # Alternate which goes first, so a drift in the machine's load does not favour one.
        for label in ("log on", "log off") if number % 2 == 0 else ("log off", "log on"):
            _switch(label == "log on")
            seconds[label].append(_timed_round(client, path, data, authorization, requests, expected))
    # The insert itself (an accepted firing's WITH statement), as the client saw each one: median per mode.
    statement_ms: dict[str, list[float]] = {"log on": [], "log off": []}

    def timed(label: str) -> Any:
        def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                if sql.startswith("WITH"):
                    statement_ms[label].append((time.perf_counter() - started) * 1000)

        return wrapper

    for number in range(rounds):
        for label in ("log on", "log off") if number % 2 == 0 else ("log off", "log on"):
            _switch(label == "log on")
            with connection.execute_wrapper(timed(label)):
                _timed_round(client, path, data, authorization, requests, expected)
    _switch(True)
    lines_before = TriggerFiring.objects.count()
    with CaptureQueriesContext(connection) as captured:
        _timed_round(client, path, data, authorization, requests, expected)
    table = TriggerFiring._meta.db_table
    log_writes = [
        q["sql"] for q in captured.captured_queries if table in q["sql"] and not q["sql"].startswith("SELECT")
    ]
    ratios = [on / off for on, off in zip(seconds["log on"], seconds["log off"], strict=True)]
    for label in seconds:
        result[label]["ms_per_request"] = round(statistics.median(seconds[label]) * 1000, 3)
        result[label]["ms_per_round"] = [round(s * 1000, 3) for s in seconds[label]]
    result["time_ratio_on_over_off"] = {
        "median": round(statistics.median(ratios), 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
    }
    result["statements_writing_the_log_in_one_round_of_requests"] = len(log_writes)
    result["insert_statement_ms_median"] = {
        label: round(statistics.median(times), 3) if times else None for label, times in statement_ms.items()
    }
    result["log_lines_after"] = TriggerFiring.objects.count()
    result["log_lines_before"] = lines_before
    print(f"{name}: {json.dumps({k: v for k, v in result.items() if k not in ('log on', 'log off')})}")
    for label in ("log on", "log off"):
        shown = {k: v for k, v in result[label].items() if k not in ("sql", "ms_per_round")}
        print(f"  {label}: {shown}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests per round (default 300)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each, alternating (default 6)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()

    harness.service_environment()
    harness.recreate_database()
    harness.prepare_data()
    from django.contrib.auth.models import User

    from keys import tokens
    from triggers import services

    user = User.objects.get(email="bench@example.com")
    trigger, token, _ = services.create_trigger(user, "A push to main", "Tell me what changed")
    path = f"/api/v1/inbound/webhook/{trigger.public_id}"
    from django.test import Client

    warm = Client(HTTP_HOST="127.0.0.1")
    for _ in range(120):  # the log at its steady state: 100 lines, each firing trims one
        warm.post(path, data=json.dumps(PAYLOAD), content_type="application/json",
                  headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    load = harness.load_average()
    results = {
        "load_average_before": load,
        "accepted": measure("accepted firing", path, f"Bearer {token}", 200, args.requests, args.rounds),
        "refused": measure(
            # Well-formed, checksum right, never stored: each costs the lookup of its digest, like a guessed token.
            "wrong token (flood)",
            path,
            f"Bearer {tokens.generate_checked(services.TOKEN_PREFIX)}",
            401,
            args.requests,
            args.rounds,
        ),
        "load_average_after": harness.load_average(),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
