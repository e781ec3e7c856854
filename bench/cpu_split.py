"""CPU per request by process while wrk drives one scenario: the gunicorn workers, PostgreSQL, Redis.

When the machine's cores are busy, requests per second follow the CPU each request costs across every process
that serves it, and this shows where that CPU goes; it moves much less between runs than requests per second,
which depend on how the connections happen to spread over the workers.

    .venv/bin/python -m bench.cpu_split current 32 --seconds 8      (scenario names as in `make bench --only`)

Recreates the benchmark database like `make bench`. Bounded: one wrk run of --seconds.
"""

import argparse
import os
from collections import Counter
from pathlib import Path

from bench import run as harness
from bench.load import run_wrk
from bench.server import Server, _children, cpu_seconds


def _processes() -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "comm").read_text().strip()
            except OSError:
                continue
    return found


def _idle_and_total() -> tuple[int, int]:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return values[3] + values[4], sum(values)  # idle + iowait, everything


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", help="current, legacy, refused, baseline (the first word of a scenario's name)")
    parser.add_argument("connections", type=int)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--gunicorn-arg", action="append", default=[], help="extra gunicorn argument (repeatable)")
    args = parser.parse_args()

    env = harness.service_environment()
    harness.wrk_binary()
    harness.recreate_database()
    keys = harness.prepare_data()
    env.update({k: os.environ[k] for k in ("BENCH_CONVERSATION_ID", "BENCH_API_KEY_ID")})
    scenario = next(s for s in harness.scenarios(keys) if s.name.split()[0].rstrip(":") == args.scenario)
    server = Server(env, args.gunicorn_arg, Path("/tmp/bench-cpu-split.log"))
    try:
        server.wait_ready("/api/")
        run_wrk(server.url, scenario, harness.BODY_FILE, 8, 1)  # warm every worker
        workers = set(_children(server.process.pid))
        before = {pid: cpu_seconds(pid) or 0.0 for pid in _processes()}
        idle_before, total_before = _idle_and_total()
        result = run_wrk(server.url, scenario, harness.BODY_FILE, args.connections, args.seconds)
        idle_after, total_after = _idle_and_total()
        spent: Counter[str] = Counter()
        for pid, name in _processes().items():
            seconds = (cpu_seconds(pid) or 0.0) - before.get(pid, 0.0)
            if seconds > 0:
                spent[f"gunicorn worker {pid}" if pid in workers else name] += seconds
    finally:
        server.stop()
    requests = result.rps * result.seconds
    idle = 100 * (idle_after - idle_before) / max(1, total_after - total_before)
    print(f"{scenario.name}, {args.connections} connections: {result.rps:.0f} req/s, p50 {result.p50_ms:.1f} ms, "
          f"p99 {result.p99_ms:.1f} ms, machine idle {idle:.0f} %")  # fmt: skip
    for name, seconds in spent.most_common(8):
        print(f"  {name:28s} {seconds:6.2f} s CPU  {1000 * seconds / requests:6.3f} ms per request")


if __name__ == "__main__":
    main()
