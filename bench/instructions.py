"""Instructions per request, counted by valgrind's callgrind: a figure that other load on the machine does not move.

Requests per second and CPU seconds drift by several percent between runs on a shared machine, more than most
single changes to the request path are worth. Callgrind counts the instructions this process executes, whatever
else runs, so it shows what a change did. Each scenario is run twice in a child process under callgrind, with
`--requests LOW,HIGH` requests through Django's WSGI handler (the whole middleware stack, the server's settings,
PostgreSQL and Redis as in `make bench`); the difference divided by HIGH - LOW is one request's count, without
start-up. PostgreSQL's and Redis's own work is not counted (see `bench.cpu_split` for that), nor the kernel's.

    apt-get install -y valgrind
    .venv/bin/python -m bench.instructions current baseline       (about a minute per scenario, one core each)
    .venv/bin/python -m bench.instructions legacy --without fetch-one,joined-lookup   (those bypasses switched off)
    .venv/bin/python -m bench.instructions --ablations             (each hot-path bypass on and off: bench/ablations.py)

Recreates the benchmark database like `make bench`. Bounded: a fixed number of requests per child.
"""

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import run as harness
from bench.server import ROOT

_COLLECTED = re.compile(r"Collected : (\d+)")


def _child(scenario_name: str, requests: int, keys_file: Path) -> None:
    """Under callgrind: `requests` requests of one scenario through the WSGI handler; exits non-zero on a bad status."""
    keys = json.loads(keys_file.read_text())
    harness.service_environment()
    os.environ.update({"BENCH_CONVERSATION_ID": keys["conversation"], "BENCH_API_KEY_ID": keys["api_key"]})
    import django

    django.setup()
    harness.silence_logs()
    from bench import ablations

    ablations.switch_off([name for name in os.environ.get("BENCH_WITHOUT", "").split(",") if name])
    from django.core.handlers.wsgi import WSGIHandler

    scenario = next(s for s in harness.scenarios(keys) if s.name.split()[0].rstrip(":") == scenario_name)
    body = harness.BODY_FILE.read_bytes()
    application = WSGIHandler()
    statuses: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        statuses.append(status)

    for _ in range(requests):
        environ = {
            "REQUEST_METHOD": "POST", "PATH_INFO": scenario.path, "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1:8000", "REMOTE_ADDR": "127.0.0.1", "HTTP_USER_AGENT": "wrk",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
            **({"HTTP_AUTHORIZATION": scenario.authorization} if scenario.authorization else {}),
        }  # fmt: skip
        response = application(environ, start_response)
        b"".join(response)
        response.close()
        if not statuses[-1].startswith(str(scenario.expected_status)):
            raise SystemExit(f"{scenario.name}: answered {statuses[-1]}, expected {scenario.expected_status}")


def _count(scenario: str, requests: int, keys_file: Path, without: tuple[str, ...] = ()) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/callgrind.out",
            sys.executable, "-m", "bench.instructions", "--child", scenario, str(requests), str(keys_file),
        ]  # fmt: skip
        # A fixed hash seed: str hashes (and so set and dict layouts) then repeat from run to run.
        env = {**os.environ, "PYTHONHASHSEED": "0", "BENCH_WITHOUT": ",".join(without)}
        finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    found = _COLLECTED.search(finished.stderr)
    if finished.returncode != 0 or found is None:
        raise RuntimeError(f"{scenario} under callgrind failed:\n{finished.stderr[-2000:]}")
    return int(found[1])


def per_request(scenario: str, low: int, high: int, keys_file: Path, without: tuple[str, ...] = ()) -> float:
    with ThreadPoolExecutor(max_workers=2) as pool:  # the two counts run side by side, one core each
        low_count, high_count = pool.map(lambda n: _count(scenario, n, keys_file, without), (low, high))
    return (high_count - low_count) / (high - low)


def ablate(low: int, high: int, keys_file: Path) -> list[dict[str, Any]]:
    """Each bypass of bench/ablations.py switched off alone, against everything on, in the scenario it serves."""
    from bench.ablations import ABLATIONS

    everything_on: dict[str, float] = {}
    rows = []
    for name, (scenario, _) in ABLATIONS.items():
        if scenario not in everything_on:
            everything_on[scenario] = per_request(scenario, low, high, keys_file)
        off = per_request(scenario, low, high, keys_file, (name,))
        on = everything_on[scenario]
        rows.append({"bypass": name, "scenario": scenario, "on": on, "off": off, "saved": off - on})
        print(f"{name:24} {scenario:8} on {on / 1e6:5.2f} M  off {off / 1e6:5.2f} M  saves {(off - on) / off:6.1%}")
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", help="current, legacy, refused, baseline (as in make bench --only)")
    parser.add_argument("--requests", default="20,60", help="LOW,HIGH requests per child (default 20,60)")
    parser.add_argument("--without", default="", help="comma-separated bypasses to switch off (bench/ablations.py)")
    parser.add_argument("--ablations", action="store_true", help="each bypass on and off, in the scenario it serves")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    without = tuple(name for name in args.without.split(",") if name)
    low, high = (int(n) for n in args.requests.split(","))

    harness.service_environment()
    harness.recreate_database()
    keys = harness.prepare_data()
    keys.update(conversation=os.environ["BENCH_CONVERSATION_ID"], api_key=os.environ["BENCH_API_KEY_ID"])
    with tempfile.NamedTemporaryFile("w", suffix=".json") as keys_file:
        keys_file.write(json.dumps(keys))
        keys_file.flush()
        if args.ablations:
            rows = ablate(low, high, Path(keys_file.name))
            if args.json:
                Path(args.json).write_text(json.dumps({"requests": [low, high], "ablations": rows}, indent=2) + "\n")
            return
        counts = {name: per_request(name, low, high, Path(keys_file.name), without) for name in args.scenarios}
    baseline = counts.get("baseline")
    for name, count in counts.items():
        relative = f"  ({count / baseline:.2f} x baseline)" if baseline else ""
        print(f"{name:10} {count / 1e6:6.2f} M instructions per request{relative}")
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": [low, high], "without": without, "counts": counts}) + "\n")


if __name__ == "__main__":
    main()
