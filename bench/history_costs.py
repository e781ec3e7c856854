"""What the pages and the scrape cost as history grows: each statement before and after it was bounded by an index,
side by side on the same rows, with ``--deliveries`` deliveries (1M by default) spread over ``--threads`` threads,
one key's share of them (``--key-share``) and one thread of ``--thread-messages`` messages (100k):

- /metrics and the admin's queue state: deliveries by status (before: a GROUP BY over every delivery; after: the
  pending ones through their partial index, delivered and failed over the last hour through (status, created_at));
- a key's 14-day chart (before: a filter on created_at's date; after: a range on created_at);
- "Earlier messages" in the long thread, anchored in its middle (before: created_at < X OR (created_at = X AND
  id < Y); after: the row comparison (created_at, id) < (X, Y));
- the thread's message count on every view (before; after: not counted);
- the admin's delivery and message lists (before: two full counts, a sort by created_at, the key filter's and the
  date drill-down's scans; after: ops/admin_lists.py's estimate and newest first by id);
- one batch of the deliveries' prune (delivery/retention.py): its SELECT of 1000 through (status, created_at).

    .venv/bin/python -m bench.history_costs [--deliveries 1000000] [--json docs/benchmarks/history-costs.json]

The rows are written straight into a scratch database on BENCH_DATABASE_URL's server (migrated, then ANALYZEd); the
statements are the SQL the code sends (after) and sent before, each timed ``--repeat`` times, median in ms.
Bounded: every statement is cut after ``--statement-seconds``, and the run stops by itself.
"""

import argparse
import json
import statistics
import time
from typing import Any

import psycopg

from bench import harness

PEOPLE = """
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                       date_joined)
SELECT '', false, 'h' || g, '', '', '', false, true, now() FROM generate_series(1, %(threads)s) AS g;
INSERT INTO conversations_conversation (user_id, created_at)
SELECT id, now() FROM auth_user WHERE username LIKE 'h%%' AND NOT EXISTS (
    SELECT 1 FROM conversations_conversation AS c WHERE c.user_id = auth_user.id);
"""

SEED = """
-- The long thread: the first person's, %(thread_messages)s messages a second apart, ending now.
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at)
SELECT 'msg_' || substr(md5('t' || g), 1, 24), %(long_thread)s, 'user', 'api', 'message ' || g,
       now() - make_interval(secs => %(thread_messages)s - g)
FROM generate_series(1, %(thread_messages)s) AS g;
-- The rest of history, over the other threads, a minute apart, ending a day ago.
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at)
SELECT 'msg_' || substr(md5('h' || g), 1, 24),
       %(long_thread)s + 1 + g %% (%(threads)s - 1), 'user', 'api', 'hello',
       now() - interval '1 day' - make_interval(mins => g)
FROM generate_series(1, %(deliveries)s - %(thread_messages)s) AS g;
INSERT INTO conversations_delivery (message_id, conversation_id, api_key_id, endpoint, status, attempts, takeovers,
                                    last_error, request_id, backend, callback_id, created_at, updated_at)
SELECT m.id, m.conversation_id, CASE WHEN m.id %% %(key_every)s = 0 THEN %(key)s END, 'api_message', 'delivered',
       1, 0, '', '', 'local', '', m.created_at, m.created_at
FROM conversations_message AS m;
"""

STATEMENTS: dict[str, dict[str, list[str]]] = {
    "deliveries by status (/metrics, admin)": {
        "before": ["SELECT status, count(id) FROM conversations_delivery GROUP BY status"],
        "after": [
            "SELECT status, count(id) FROM conversations_delivery WHERE status IN ('queued', 'processing') "
            "GROUP BY status",
            "SELECT status, count(id) FROM conversations_delivery WHERE status IN ('delivered', 'failed') "
            "AND created_at >= now() - interval '1 hour' GROUP BY status",
        ],
    },
    "a key's 14-day chart": {
        "before": [
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(id) FROM conversations_delivery "
            "WHERE api_key_id = %(key)s AND endpoint IN ('api_message', 'legacy_webhook') "
            "AND (created_at AT TIME ZONE 'UTC')::date >= current_date - 13 "
            "AND (created_at AT TIME ZONE 'UTC')::date <= current_date GROUP BY 1"
        ],
        "after": [
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(id) FROM conversations_delivery "
            "WHERE api_key_id = %(key)s AND endpoint IN ('api_message', 'legacy_webhook') "
            "AND created_at >= current_date - 13 AND created_at < current_date + 1 GROUP BY 1"
        ],
    },
    "earlier messages (a 100k thread, from its middle)": {
        "before": [
            "SELECT id FROM conversations_message WHERE conversation_id = %(long_thread)s AND "
            "(created_at < %(anchor_at)s OR (created_at = %(anchor_at)s AND id < %(anchor_id)s)) "
            "ORDER BY created_at DESC, id DESC LIMIT 101"
        ],
        "after": [
            "SELECT id FROM conversations_message WHERE conversation_id = %(long_thread)s AND "
            "(created_at, id) < (%(anchor_at)s, %(anchor_id)s) ORDER BY created_at DESC, id DESC LIMIT 101"
        ],
    },
    "the admin's delivery list, first page": {
        "before": [
            "SELECT count(*) FROM conversations_delivery",
            "SELECT count(*) FROM conversations_delivery",
            "SELECT d.id FROM conversations_delivery AS d JOIN conversations_message AS m ON m.id = d.message_id "
            "ORDER BY d.created_at DESC, d.id DESC LIMIT 100",
            "SELECT DISTINCT api_key_id FROM conversations_delivery",
            "SELECT min(created_at), max(created_at) FROM conversations_delivery",
        ],
        "after": [
            "SELECT reltuples::bigint FROM pg_class WHERE oid = 'conversations_delivery'::regclass",
            "SELECT d.id FROM conversations_delivery AS d JOIN conversations_message AS m ON m.id = d.message_id "
            "ORDER BY d.id DESC LIMIT 50",
        ],
    },
    "the admin's message list, first page": {
        "before": [
            "SELECT count(*) FROM conversations_message",
            "SELECT count(*) FROM conversations_message",
            "SELECT id FROM conversations_message ORDER BY created_at, id LIMIT 100",
            "SELECT min(created_at), max(created_at) FROM conversations_message",
        ],
        "after": [
            "SELECT reltuples::bigint FROM pg_class WHERE oid = 'conversations_message'::regclass",
            "SELECT id FROM conversations_message ORDER BY id DESC LIMIT 50",
        ],
    },
    "a prune's batch: its SELECT of 1000 deliveries": {
        "before": [],
        "after": [
            "SELECT id FROM conversations_delivery WHERE status IN ('delivered', 'failed') "
            "AND created_at < now() - interval '90 days' ORDER BY status, created_at LIMIT 1000"
        ],
    },
    "the thread's count on every view": {
        "before": ["SELECT count(*) FROM conversations_message WHERE conversation_id = %(long_thread)s"],
        "after": [],
    },
}


def median_ms(db: psycopg.Connection[Any], statements: list[str], values: dict[str, Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for statement in statements:
            db.execute(statement, values).fetchall()  # type: ignore[arg-type]  # our own constants
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=1_000_000, help="deliveries in all (default 1M)")
    parser.add_argument("--threads", type=int, default=1_000, help="threads they are spread over (default 1000)")
    parser.add_argument("--thread-messages", type=int, default=100_000, help="the long thread's messages (100k)")
    parser.add_argument("--key-share", type=int, default=20, help="one delivery in N is the key's (default 20)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each statement (default 5)")
    parser.add_argument("--statement-seconds", type=float, default=30, help="a statement's limit (default 30)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args()
    results: dict[str, Any] = {"deliveries": args.deliveries, "thread_messages": args.thread_messages}
    with harness.scratch_database("bench_history") as database_url:
        env = harness.service_environment(database_url, {})
        harness.migrate(env)
        harness.people_with_keys(env, 1, "k")
        with psycopg.connect(database_url, autocommit=True) as db:
            key_id = db.execute("SELECT id FROM keys_apikey ORDER BY id LIMIT 1").fetchone()[0]  # type: ignore[index]
            seeded = time.perf_counter()
            db.execute(PEOPLE % {"threads": args.threads})  # type: ignore[arg-type]  # our own constant
            long_thread = db.execute(
                "SELECT min(c.id) FROM conversations_conversation AS c JOIN auth_user AS u ON u.id = c.user_id "
                "WHERE u.username LIKE 'h%'"
            ).fetchone()[0]  # type: ignore[index]
            seed = {
                "threads": args.threads, "thread_messages": args.thread_messages, "deliveries": args.deliveries,
                "key_every": args.key_share, "key": key_id, "long_thread": long_thread,
            }  # fmt: skip
            db.execute(SEED % seed)  # type: ignore[arg-type]  # our own constant
            db.execute("ANALYZE")
            print(f"seeded in {time.perf_counter() - seeded:.0f} s", flush=True)
            anchor_at, anchor_id = db.execute(
                "SELECT created_at, id FROM conversations_message WHERE conversation_id = %s "
                "ORDER BY created_at, id OFFSET %s LIMIT 1",
                [long_thread, args.thread_messages // 2],
            ).fetchone()  # type: ignore[misc]
            db.execute(f"SET statement_timeout = {int(args.statement_seconds * 1000)}")
            values = {"key": key_id, "long_thread": long_thread, "anchor_at": anchor_at, "anchor_id": anchor_id}
            for name, forms in STATEMENTS.items():
                before = median_ms(db, forms["before"], values, args.repeat) if forms["before"] else 0.0
                after = median_ms(db, forms["after"], values, args.repeat) if forms["after"] else 0.0
                results[name] = {"before_ms": before, "after_ms": after}
                print(f"{name}: before {before} ms, after {after} ms", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
