"""What one claim costs as one thread grows deep and as the queue spreads over many threads: the delivery queue's
claim (delivery/lifecycle.py) and the outbox's (channels/outbound/queue.py), each asked for 32 rows, with

- 1k, 10k and 100k queued in ONE thread (one person's runaway script, or an assistant outage), and
- 100k queued spread over 100k threads, one each (every person waiting once).

    .venv/bin/python -m bench.claim_depth                          # this checkout
    .venv/bin/python -m bench.claim_depth --checkout /tmp/before   # another version (bench/ copied into it)

The rows are written straight into a scratch database on BENCH_DATABASE_URL's server (migrated by the checkout's
own migrations, then ANALYZEd); each claim runs in a transaction rolled back afterwards, so every repetition sees the
same queue; the median of ``--repeat`` is printed, in ms. Bounded: every claim statement is cut after
``--statement-seconds`` (reported as "> N ms"), and the whole run stops by itself.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from bench import harness

SHAPES = [("one thread", 1_000), ("one thread", 10_000), ("one thread", 100_000), ("spread", 100_000)]

SEED = """
TRUNCATE conversations_delivery, channels_outboundmessage, conversations_message, conversations_conversation,
         auth_user CASCADE;
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                       date_joined)
SELECT '', false, 'u' || g, '', '', '', false, true, now() FROM generate_series(1, %(people)s) AS g;
INSERT INTO conversations_conversation (user_id, created_at) SELECT id, now() FROM auth_user;
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at)
SELECT 'msg_' || substr(md5(g::text), 1, 24), c.id, 'user', 'api', 'hello ' || g,
       now() - interval '1 millisecond' * (%(rows)s - g)
FROM generate_series(1, %(rows)s) AS g
JOIN conversations_conversation AS c ON c.user_id = (SELECT min(id) FROM auth_user) + (g - 1) %% %(people)s;
INSERT INTO conversations_delivery (message_id, conversation_id, endpoint, status, attempts, takeovers, last_error,
                                    request_id, backend, callback_id, created_at, updated_at)
SELECT m.id, m.conversation_id, 'api_message', 'queued', 0, 0, '', '', 'local', '', now(), now()
FROM conversations_message AS m ORDER BY m.id;
INSERT INTO channels_outboundmessage (message_id, person_id, part, parts, channel, address, text, status, attempts,
    takeovers, last_error, held_reason, waiting_for_quiet_hours, as_template, provider_message_id, provider_status,
    provider_error, created_at, updated_at)
SELECT m.id, c.user_id, 1, 1, 'sms', '+14155550100', m.text, 'queued', 0, 0, '', '', false, false, '', '', '',
       now(), now()
FROM conversations_message AS m JOIN conversations_conversation AS c ON c.id = m.conversation_id ORDER BY m.id;
"""

MEASURE = """
import json, statistics, time
from django.db import connection, transaction
from delivery import lifecycle
from channels.outbound import queue as outbox

def median_ms(claim):
    times, got = [], 0
    for _ in range(%(repeat)d):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL statement_timeout = %(timeout_ms)d")
            started = time.perf_counter()
            try:
                got = len(claim())
            except Exception:
                return None, 0
            times.append(time.perf_counter() - started)
            transaction.set_rollback(True)
    return round(statistics.median(times) * 1000, 2), got

deliveries, claimed = median_ms(lambda: lifecycle.claim(32))
sends, sent = median_ms(lambda: outbox.claim(32))
print(json.dumps({"deliveries_ms": deliveries, "deliveries_claimed": claimed,
                  "outbox_ms": sends, "outbox_claimed": sent}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=harness.ROOT, help="the version to measure (default: this)")
    parser.add_argument("--repeat", type=int, default=5, help="claims measured per shape (default 5)")
    parser.add_argument("--statement-seconds", type=float, default=30, help="a claim's limit (default 30)")
    parser.add_argument("--json", metavar="PATH", help="append each shape's result as a JSON line")
    parser.add_argument("--shapes", default="0,1,2,3", help="which of the four shapes, by number (default all)")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(args.checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    with harness.scratch_database("bench_claims") as database_url:
        env = harness.service_environment(database_url, {})
        run = ["manage.py", "migrate", "--no-input", "-v", "0"]
        subprocess.run([sys.executable, *run], cwd=args.checkout, env=env, check=True, timeout=600)
        for shape, rows in [SHAPES[int(n)] for n in args.shapes.split(",")]:
            people = 1 if shape == "one thread" else rows
            with psycopg.connect(database_url, autocommit=True) as db:
                db.execute(SEED % {"people": people, "rows": rows})  # type: ignore[arg-type]  # our own constant
                db.execute("ANALYZE")
            code = MEASURE % {"repeat": args.repeat, "timeout_ms": int(args.statement_seconds * 1000)}
            done = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", code],
                cwd=args.checkout, env=env, capture_output=True, text=True, check=True, timeout=3600,
            )  # fmt: skip
            result: dict[str, Any] = {"commit": commit, "shape": shape, "queued": rows, "threads": people}
            result |= json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(result), flush=True)
            if args.json:
                with open(args.json, "a") as out:
                    out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
