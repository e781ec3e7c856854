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
from collections import Counter

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

    from ops.bounded import process_budget
    from tests.hostile_servers import calendar_answers_in_threads

    flood = calendar_answers_in_threads(args.answers, args.threads)
    refusals = Counter(
        "busy" if "other answers" in text else "too large" if "larger" in text else text for text in flood.refusals
    )
    figures = {
        "answers": args.answers,
        "threads": args.threads,
        "budget_mb": int(os.environ.get("PROCESS_MAX_ANSWER_BYTES", 50 * MB)) // MB,
        "before_mb": flood.before // MB,
        "peak_mb": flood.peak // MB,
        "idle_mb": flood.idle // MB,
        "seconds": round(flood.seconds, 1),
        "refusals": dict(refusals),
        "held_after": process_budget.held,  # every bound gave its bytes back
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
