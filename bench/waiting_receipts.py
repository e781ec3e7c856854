"""What waiting receipts cost accepting: gunicorn as the Procfile runs it (gunicorn.conf.py), PostgreSQL and Redis,
wrk posting messages for ``--seconds``, with no client waiting, then with ``--waiters`` clients each asking
``GET /api/v1/inbound/messages/{id}?wait=N`` in a loop (and honouring Retry-After), alternately ``--rounds`` times.

No worker runs, so no message becomes final: every wait lasts its whole N, the worst case for the threads it holds.

    .venv/bin/python -m bench.waiting_receipts --waiters 100 --seconds 10 --rounds 3

Every run is bounded in time; needs wrk, PostgreSQL (BENCH_DATABASE_URL's server; a scratch database) and Redis.
"""

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench.harness import REDIS_URL, migrate, people_with_keys, scratch_database, service_environment
from bench.load import Scenario, run_wrk
from bench.server import ROOT, Server

BODY = ROOT / "bench" / "body.json"
UNLIMITED = "1000000/m"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waiters", type=int, default=100, help="clients waiting on receipts (default 100)")
    parser.add_argument("--wait", type=float, default=10, help="each receipt's ?wait= (default 10)")
    parser.add_argument("--seconds", type=int, default=10, help="length of each accepting run (default 10)")
    parser.add_argument("--connections", type=int, default=16, help="wrk's connections posting (default 16)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, alternately (default 2)")
    parser.add_argument("--json", metavar="PATH", help="append the result as one JSON line to PATH")
    return parser.parse_args()


class Waiters:
    """``count`` threads, each asking for one receipt with ?wait= again and again until stopped; what they got."""

    def __init__(self, port: int, key: str, message_ids: list[str], wait: float) -> None:
        self.port, self.key, self.wait = port, key, wait
        self.outcomes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(one,), daemon=True) for one in message_ids]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.wait + 10)

    def _loop(self, message_id: str) -> None:
        path = f"/api/v1/inbound/messages/{message_id}?wait={self.wait:g}"
        while not self._stop.is_set():
            # A connection per request: after a Retry-After longer than gunicorn's keep-alive the server has closed
            # an idle one, and reusing it would count as an error what is only the client's stale socket.
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.wait + 10)
            try:
                connection.request("GET", path, headers={"Authorization": f"Bearer {self.key}"})
                answer = connection.getresponse()
                answer.read()
            except (OSError, http.client.HTTPException):
                self._note("error")
                self._stop.wait(1)
                continue
            finally:
                connection.close()
            turned_away = answer.getheader("Retry-After") is not None
            self._note(f"turned away ({answer.status})" if turned_away else f"waited ({answer.status})")
            if turned_away:
                self._stop.wait(float(answer.getheader("Retry-After") or 1))

    def _note(self, outcome: str) -> None:
        with self._lock:
            self.outcomes[outcome] += 1


def message_ids(port: int, key: str, count: int) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    made = []
    for number in range(count):
        body = json.dumps({"message": f"waiting {number}"})
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connection.request("POST", "/api/v1/inbound/api-message", body, headers)
        made.append(json.loads(connection.getresponse().read())["id"])
    connection.close()
    return made


def main() -> None:
    options = arguments()
    settings = {"INGEST_RATE_LIMIT": UNLIMITED, "RECEIPT_RATE_LIMIT": UNLIMITED, "REDIS_URL": REDIS_URL}
    runs: dict[str, list[dict[str, float]]] = {"none": [], "waiting": []}
    outcomes: Counter[str] = Counter()
    with scratch_database("bench_waiting") as database_url, tempfile.TemporaryDirectory() as folder:
        env = service_environment(database_url, settings)
        migrate(env)
        sender, asker = people_with_keys(env, 2, "waiting")
        server = Server(env, [], Path(folder) / "gunicorn.log")
        try:
            server.wait_ready("/healthz")
            waiting = message_ids(server.port, asker, options.waiters)
            scenario = Scenario("accept", "/api/v1/inbound/api-message", f"Bearer {sender}", 200, True)
            for round_number in range(options.rounds):
                # Alternately first, so that a machine whose load drifts during the run favours neither.
                for kind in ("none", "waiting") if round_number % 2 == 0 else ("waiting", "none"):
                    waiters = Waiters(server.port, asker, waiting, options.wait) if kind == "waiting" else None
                    if waiters is not None:
                        waiters.start()
                        time.sleep(1)  # every waiter has asked once
                    run = run_wrk(server.url, scenario, BODY, options.connections, options.seconds)
                    if waiters is not None:
                        waiters.stop()
                        outcomes.update(waiters.outcomes)
                    runs[kind].append({"rps": run.rps, "p99_ms": run.p99_ms, "non_2xx": run.non_2xx})
                    print(f"{kind:8} {run.rps:8.0f} req/s  p99 {run.p99_ms:7.1f} ms  non-2xx {run.non_2xx}", flush=True)
        finally:
            server.stop()
    result = {
        "waiters": options.waiters,
        "wait": options.wait,
        "connections": options.connections,
        "seconds": options.seconds,
        "median_rps": {kind: statistics.median(r["rps"] for r in found) for kind, found in runs.items()},
        "median_p99_ms": {kind: statistics.median(r["p99_ms"] for r in found) for kind, found in runs.items()},
        "waiter_answers": dict(outcomes),
        "runs": runs,
    }
    print(json.dumps(result, indent=2))
    if options.json:
        with open(options.json, "a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
