"""The channel sender in two versions of the code, side by side in one run: phase 1 of `bench.channels` (sends/s and
the worker's CPU per send, a Twilio stand-in answering in ``--provider-ms``) alternately in a "before" checkout and
an "after" one, ``--rounds`` times each, the order alternating from one round to the next (before, after; after,
before; …), so that whatever else loads the shared machine falls on both alike.

    git worktree add --detach /tmp/before <commit>   # the version to compare against
    cp -r bench /tmp/before/                         # the same harness for both (bench/ is not the service's code)
    .venv/bin/python -m bench.channels_ab /tmp/before . --rounds 4 --json docs/benchmarks/channels-ab-<date>.jsonl

Prints each run (with the load average just before it) and, at the end, each version's median sends/s, CPU ms per
send and seconds from the worker's start to its first send, the median of the rounds' after/before ratios, and the
ratio of the medians. Every run is bounded (bench.channels waits at most 60 s for the first send and 120 s for the
last).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return done.stdout.strip()


def one_run(checkout: Path, args: argparse.Namespace) -> dict[str, Any]:
    load = os.getloadavg()
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as output:
        command = [
            sys.executable, "-m", "bench.channels", "--sends-only", "--sends", str(args.sends),
            "--provider-ms", str(args.provider_ms), "--concurrency", str(args.concurrency), "--json", output.name,
        ]  # fmt: skip
        subprocess.run(command, cwd=checkout, check=True, timeout=600, stdout=subprocess.DEVNULL)
        result = json.loads(Path(output.name).read_text().splitlines()[-1])
    return {"load_before": [round(figure, 2) for figure in load], **result["outbound"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each version (default 3)")
    parser.add_argument("--sends", type=int, default=1500, help="texts in the outbox per run (default 1500)")
    parser.add_argument("--provider-ms", type=float, default=200, help="the provider's answer time (default 200)")
    parser.add_argument("--concurrency", type=int, default=64, help="CHANNEL_CONCURRENCY (default 64)")
    parser.add_argument("--json", metavar="PATH", help="append each run and the summary as JSON lines")
    args = parser.parse_args()
    versions = {"before": args.before, "after": args.after}
    commits = {name: commit_of(path) for name, path in versions.items()}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    lines = []
    for number in range(args.rounds):
        order = ["before", "after"] if number % 2 == 0 else ["after", "before"]
        for name in order:
            run = one_run(versions[name], args)
            runs[name].append(run)
            line = {"round": number, "version": name, "commit": commits[name], **run}
            print(json.dumps(line), flush=True)
            lines.append(line)
    summary: dict[str, Any] = {"commits": commits, "rounds": args.rounds, "sends": args.sends}
    for figure in ("sends_per_second", "cpu_ms_per_send", "seconds_to_first_send"):
        before = [run[figure] for run in runs["before"]]
        after = [run[figure] for run in runs["after"]]
        summary[figure] = {
            "before_median": round(statistics.median(before), 2),
            "after_median": round(statistics.median(after), 2),
            "ratio_of_medians": round(statistics.median(after) / statistics.median(before), 3),
            "round_ratios": [round(a / b, 3) for a, b in zip(after, before, strict=True)],
        }
        summary[figure]["median_round_ratio"] = statistics.median(summary[figure]["round_ratios"])
    print(json.dumps(summary), flush=True)
    lines.append({"summary": summary})
    if args.json:
        with open(args.json, "a") as out:
            out.write("".join(json.dumps(line) + "\n" for line in lines))


if __name__ == "__main__":
    main()
