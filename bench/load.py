"""Drive the server with wrk (its own process, one thread, bounded in time) and read the summary post.lua prints."""

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LUA = Path(__file__).resolve().parent / "post.lua"


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    authorization: str | None
    expected_status: int
    accepted: bool  # whether a request records a message
    idempotency_keys: bool = False  # each request with an Idempotency-Key of its own (post.lua)


@dataclass
class Run:
    scenario: str
    connections: int
    requests: int
    seconds: float
    non_2xx: int
    socket_errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rps": self.rps}


def wrk_binary() -> str:
    binary = shutil.which("wrk")
    if binary is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk (Debian) or brew install wrk (macOS).")
    return binary


def run_wrk(url: str, scenario: Scenario, body_file: Path, connections: int, seconds: int) -> Run:
    env = {
        **os.environ,
        "BENCH_BODY_FILE": str(body_file),
        "BENCH_AUTHORIZATION": scenario.authorization or "",
        "BENCH_IDEMPOTENCY_KEYS": "1" if scenario.idempotency_keys else "",
    }
    command = [
        wrk_binary(), "--threads", "1", "--connections", str(connections), "--duration", f"{seconds}s",
        "--timeout", "5s", "--script", str(LUA), url + scenario.path,
    ]  # fmt: skip
    # wrk stops by itself after `seconds`; the timeout is only a guard against a hung run.
    output = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds + 30, check=True)
    line = next(line for line in output.stdout.splitlines() if line.startswith("BENCH_RESULT "))
    result = json.loads(line.removeprefix("BENCH_RESULT "))
    return Run(
        scenario=scenario.name,
        connections=connections,
        requests=result["requests"],
        seconds=result["duration_us"] / 1e6,
        non_2xx=result["non_2xx"],
        socket_errors=sum(result[k] for k in ("connect_errors", "read_errors", "write_errors", "timeouts")),
        p50_ms=result["p50_us"] / 1000,
        p95_ms=result["p95_us"] / 1000,
        p99_ms=result["p99_us"] / 1000,
        max_ms=result["max_us"] / 1000,
    )
