"""A process's resident memory while its threads read hostile calendar answers, and once they are done: the
figures of docs/explanation/limits.md ("All answers together"). A CalDAV server on 127.0.0.1 streams every answer
without end (tests/hostile_servers.py); ``--threads`` threads call the real calendar code (connections/calendars.py)
``--answers`` times in all. Run it on this branch and on one without the process's budget, side by side.

    .venv/bin/python -m bench.answer_memory --answers 500 --threads 16
    PROCESS_MAX_ANSWER_BYTES=1000000000000 .venv/bin/python -m bench.answer_memory   # no shared budget

Prints one JSON line: megabytes before, at the peak, and idle 3 s after (the clean-up runs within 2.5 s), and how
many calls each refusal ended.
"""

import argparse
import json
import logging
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

MB = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=500)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")  # plain http:// and 127.0.0.1 allowed, as in development
    import django

    django.setup()
    logging.getLogger("ops.bounded").setLevel(logging.ERROR)  # one warning per refusal otherwise

    from connections.calendars import CalendarServer, list_events
    from connections.network import ServiceError
    from tests.hostile_servers import endless_http, rss

    start = datetime(2026, 1, 5, tzinfo=UTC)
    refusals: Counter[str] = Counter()
    with endless_http(status="207 Multi-Status", content_type="text/xml", seconds=300) as server:
        calendar = CalendarServer(url=server.url, username="a", password="b", calendar_url=server.url + "cal/")

        def answer(_: int) -> None:
            try:
                list_events(calendar, start, start + timedelta(days=7), seconds=20)
            except ServiceError as error:
                refusals[
                    "busy" if "other answers" in str(error) else "too large" if "larger" in str(error) else str(error)
                ] += 1

        answer(0)  # imports and caches first
        refusals.clear()
        time.sleep(1)
        before = peak = rss()
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.01):
                peak = max(peak, rss())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(answer, range(args.answers)))
        seconds = time.monotonic() - began
        done.set()
        sampler.join()
        time.sleep(3)
        idle = rss()
    print(
        json.dumps(
            {
                "answers": args.answers,
                "threads": args.threads,
                "budget_mb": int(os.environ.get("PROCESS_MAX_ANSWER_BYTES", 50 * MB)) // MB,
                "before_mb": before // MB,
                "peak_mb": peak // MB,
                "idle_mb": idle // MB,
                "seconds": round(seconds, 1),
                "refusals": dict(refusals),
            }
        )
    )


if __name__ == "__main__":
    main()
