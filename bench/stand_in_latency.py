"""How long a stand-in server (bench/harness.py's HANDLER) takes to answer at once, with Nagle's algorithm on and
off, side by side in one run: the delivery runtime's stand-in answering after 0 ms, sequential POSTs over one
keep-alive connection (http.client, as the service's assistant client), alternating the two servers in rounds.

    .venv/bin/python -m bench.stand_in_latency --requests 200 --rounds 3
    .venv/bin/python -m bench.stand_in_latency --requests 10 --rounds 1 --runtime-ms 200   # ms above the 200

An answer written as two writes (headers, then body) with Nagle on waits for the client's delayed ACK of the first
before the second goes out: about 40 ms on Linux, on a connection past its first few exchanges.
"""

import argparse
import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.harness import RUNTIME, stand_in

# The delivery runtime's handler with Nagle's algorithm back on: the stand-ins as they were before.
NAGLE_ON = RUNTIME + "H.disable_nagle_algorithm = False\n"


def timings(port: int, requests: int, runtime_ms: float) -> list[float]:
    """Milliseconds per request above ``runtime_ms``, ``requests`` sequential POSTs on one keep-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"message": "hello"}).encode()
    took = []
    for n in range(requests):
        started = time.perf_counter()
        connection.request("POST", "/hooks/assistant", body, {"Content-Type": "application/json", "webhook-id": str(n)})
        response = connection.getresponse()
        response.read()
        took.append((time.perf_counter() - started) * 1000 - runtime_ms)
    connection.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests per round and server (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--runtime-ms", type=float, default=0, help="the stand-ins answer after this (default 0)")
    parser.add_argument("--json", metavar="PATH", help="append the result as one JSON line to PATH")
    args = parser.parse_args()
    seen = Path(tempfile.mkstemp(prefix="bench-stand-in-")[1])
    delay = str(args.runtime_ms / 1000)
    servers = {"nagle_on": stand_in(NAGLE_ON, delay, str(seen)), "nodelay": stand_in(RUNTIME, delay, str(seen))}
    try:
        taken: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, (_, port) in servers.items():
                taken[name] += timings(port, args.requests, args.runtime_ms)
        result = {
            name: {
                "requests": len(ms),
                "p50_ms": round(statistics.median(ms), 2),
                "p90_ms": round(statistics.quantiles(ms, n=10)[-1], 2),
                "mean_ms": round(statistics.fmean(ms), 2),
                "over_30_ms": sum(1 for m in ms if m > 30),
            }
            for name, ms in taken.items()
        } | {"runtime_ms": args.runtime_ms, "loadavg": os.getloadavg()}
        print(json.dumps(result))
        if args.json:
            with open(args.json, "a") as out:
                out.write(json.dumps(result) + "\n")
    finally:
        seen.unlink(missing_ok=True)
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
