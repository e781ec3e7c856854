"""Where a worker's time goes: py-spy samples every gunicorn worker while wrk drives one scenario."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.load import Scenario, run_wrk
from bench.server import Server

PROFILE = Path("/tmp/bench-profile.txt")  # collapsed stacks, one "frame;frame;… count" per line


def profile_scenario(server: Server, scenario: Scenario, body_file: Path, seconds: int) -> None:
    py_spy = Path(sys.executable).with_name("py-spy")
    sampler = subprocess.Popen(
        [str(py_spy), "record", "--pid", str(server.process.pid), "--subprocesses", "--rate", "250",
         "--duration", str(seconds + 1), "--format", "raw", "--output", str(PROFILE), "--nonblocking",
         "--gil"],  # only the thread that holds the GIL: where the worker's CPU goes, not where its threads wait
    )  # fmt: skip
    run = run_wrk(server.url, scenario, body_file, 32, seconds)
    sampler.wait(timeout=seconds + 60)
    print(f"{scenario.name}: {run.rps:.0f} req/s, p50 {run.p50_ms:.2f} ms, p99 {run.p99_ms:.2f} ms")
    print_hottest(PROFILE)


def print_hottest(profile: Path, limit: int = 40) -> None:
    """Inclusive share of samples per frame (a frame counted once per stack), hottest first."""
    inclusive: Counter[str] = Counter()
    total = 0
    pending = ""  # a stack whose frame text held a line break (py-spy writes such a name as it is)
    for line in profile.read_text().splitlines():
        stack, _, count = (pending + line).rpartition(" ")
        if not count.isdigit():
            pending += line + " "
            continue
        pending = ""
        samples = int(count)
        total += samples
        for frame in set(stack.split(";")):
            inclusive[frame] += samples
    for frame, samples in inclusive.most_common(limit):
        print(f"{100 * samples / total:5.1f}%  {frame[:150]}")
