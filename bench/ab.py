"""Two versions of the code side by side: `make bench`'s current endpoint and baseline at 32 connections, run
alternately from two checkouts, so that whatever else loads the shared machine falls on both alike.

    git worktree add /tmp/before <commit>        # the version to compare against
    cp -r bench /tmp/before/                     # the same harness for both (bench/ is not the service's code)
    .venv/bin/python -m bench.ab /tmp/before . --pairs 3 --json docs/benchmarks/ab-<date>.json

Each pair runs `python -m bench.run --seconds 5 --rounds 5 --connections 32 --load-only --only current,baseline`
in the "before" checkout, then in the "after" one (about 80 s each; every wrk run stops by itself). A round's ratio
is the endpoint's requests per second over the baseline's in the same round (run one after the other); each version's
figure is the median over all its rounds, and the spread of the rounds says how noisy the machine was.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

COMMAND = [
    "-m", "bench.run", "--seconds", "5", "--rounds", "5", "--connections", "32", "--no-docs", "--load-only",
    "--only", "current,baseline",
]  # fmt: skip


def one_run(checkout: Path) -> list[float]:
    """The ratio of each round of one bench.run in this checkout."""
    with tempfile.NamedTemporaryFile(suffix=".json") as output:
        subprocess.run(
            [sys.executable, *COMMAND, "--json", output.name], cwd=checkout, check=True, timeout=900,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        result = json.loads(Path(output.name).read_text())
    rounds = result["every_round"]
    current = [r["rps"] for r in rounds if r["scenario"].startswith("current")]
    baseline = [r["rps"] for r in rounds if r["scenario"] == "baseline"]
    return [c / b for c, b in zip(current, baseline, strict=True)]


def summary(ratios: list[float]) -> dict[str, Any]:
    return {
        "rounds": len(ratios),
        "median": round(statistics.median(ratios), 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
        "per_round": [round(r, 3) for r in ratios],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--pairs", type=int, default=3, help="before/after runs, alternating (default 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    ratios: dict[str, list[float]] = {"before": [], "after": []}
    for pair in range(args.pairs):
        for label in ("before", "after"):
            found = one_run(getattr(args, label).resolve())
            ratios[label] += found
            print(f"pair {pair + 1} {label:6} rounds {' '.join(f'{r:.2f}' for r in found)}", flush=True)
    result = {label: summary(found) for label, found in ratios.items()}
    result["after_over_before"] = round(result["after"]["median"] / result["before"]["median"], 3)
    print(json.dumps({k: v if not isinstance(v, dict) else {**v, "per_round": "…"} for k, v in result.items()}))
    if args.json:
        Path(args.json).write_text(json.dumps({"command": COMMAND, "pairs": args.pairs, **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
