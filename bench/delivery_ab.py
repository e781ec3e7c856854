"""The delivery benchmark in two versions of the code, side by side in one run: `bench.delivery` alternately in a
"before" checkout and an "after" one, for a runtime answering in 0 ms, 200 ms and 2 s (``--runtimes``), so that
whatever else loads the shared machine falls on both alike: the order alternates from one cell to the next
(before, after; after, before; …).

    git worktree add /tmp/before <commit>        # the version to compare against
    cp -r bench /tmp/before/                     # the same harness for both (bench/ is not the service's code)
    .venv/bin/python -m bench.delivery_ab /tmp/before . --seconds 8 --json docs/benchmarks/delivery-ab-<date>.jsonl

Prints, per runtime, each version's delivered/s, accept→delivered p50 and worker CPU-ms per delivered message, and
after/before ratios. Short windows (``--seconds``) keep it light on a shared machine; every run is bounded.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CELLS = {  # runtime ms: (rate offered, concurrency)
    0: (100, 32),
    200: (100, 64),
    2000: (100, 256),
}
FIGURES = ["delivered_per_s", "latency_p50_ms", "latency_p99_ms", "attempt_p50_ms", "worker_cpu_ms_per_delivered"]


def one_run(checkout: Path, runtime_ms: int, rate: int, concurrency: int, seconds: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as output:
        command = [
            sys.executable, "-m", "bench.delivery", "--rate", str(rate), "--seconds", str(seconds),
            "--runtime-ms", str(runtime_ms), "--concurrency", str(concurrency), "--users", "200",
            "--drain-seconds", "30", "--json", output.name,
        ]  # fmt: skip
        subprocess.run(command, cwd=checkout, check=True, timeout=600, stdout=subprocess.DEVNULL)
        return dict(json.loads(Path(output.name).read_text().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--seconds", type=float, default=8, help="each run's arrival window (default 8)")
    parser.add_argument(
        "--runtimes", default="200,2000", help=f"runtimes to compare, ms, of {sorted(CELLS)} (default 200,2000)"
    )
    parser.add_argument("--json", metavar="PATH", help="append each run and each comparison as JSON lines")
    args = parser.parse_args()
    lines = []
    for n, runtime_ms in enumerate(int(ms) for ms in args.runtimes.split(",")):
        rate, concurrency = CELLS[runtime_ms]
        if n % 2 == 0:
            before = one_run(args.before, runtime_ms, rate, concurrency, args.seconds)
            after = one_run(args.after, runtime_ms, rate, concurrency, args.seconds)
        else:
            after = one_run(args.after, runtime_ms, rate, concurrency, args.seconds)
            before = one_run(args.before, runtime_ms, rate, concurrency, args.seconds)
        ratios = {
            figure: round(after[figure] / before[figure], 2) if before.get(figure) and after.get(figure) else None
            for figure in FIGURES
        }
        comparison = {"runtime_ms": runtime_ms, "rate": rate, "concurrency": concurrency, "after_over_before": ratios}
        shown = [*FIGURES, "loadavg"]
        print(json.dumps({"before": {f: before.get(f) for f in shown}, "after": {f: after.get(f) for f in shown}}))
        print(json.dumps(comparison))
        lines += [
            json.dumps({"version": "before", **before}),
            json.dumps({"version": "after", **after}),
            json.dumps(comparison),
        ]
    if args.json:
        with open(args.json, "a") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
