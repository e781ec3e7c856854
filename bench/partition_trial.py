"""One trial of a messages table partitioned by month, beside today's, on the history bench/history_at_scale.py
left in a database (``--keep``):

- ``trial_plain``: today's table as the migrations declare it (``LIKE conversations_message INCLUDING ALL``: the
  same columns, identity, indexes and unique constraint), filled with the same rows;
- ``trial_monthly``: the same columns declared ``PARTITION BY RANGE (created_at)``, one partition per calendar
  month, the same indexes on each; its primary key has to be ``(id, created_at)`` and its unique public id
  ``(public_id, created_at)``, since a unique index of a partitioned table must hold the partition key.

Each statement the service sends to messages (accepting's INSERT; a receipt by public id, and a lookup by id alone;
the thread's newest page and the poll's page since a burst; the key's list, deliveries joined to their messages; the
admin's newest-first page) is run on both, median of ``--repeat`` (ms, as the client sees it) with the plan's
planning and execution time, buffers and how many partitions it read. Then what partitioning gives retention: the
oldest month dropped as one partition (DETACH … CONCURRENTLY, then DROP) against the same rows deleted from the
plain table in batches of 1,000, oldest first, as ops/pruning.py deletes. What it refuses is tried and reported
(a unique public id alone; a foreign key from deliveries to a message's id).

    .venv/bin/python -m bench.partition_trial --database bench_history --json docs/benchmarks/partition-trial.json
"""

import argparse
import json
import os
import statistics
import time
from typing import Any

import psycopg

from bench import harness

PLAIN = """
DROP TABLE IF EXISTS trial_plain, trial_monthly CASCADE;
CREATE TABLE trial_plain (LIKE conversations_message INCLUDING ALL);
INSERT INTO trial_plain SELECT * FROM conversations_message ORDER BY id;
"""

# The columns as the migrations make them, the identity on the parent (rows go in through it).
MONTHLY = """
CREATE TABLE trial_monthly (LIKE conversations_message INCLUDING DEFAULTS INCLUDING IDENTITY)
    PARTITION BY RANGE (created_at);
ALTER TABLE trial_monthly ADD PRIMARY KEY (id, created_at);
ALTER TABLE trial_monthly ADD CONSTRAINT trial_monthly_public_id_unique UNIQUE (public_id, created_at);
CREATE INDEX trial_monthly_thread_order ON trial_monthly (conversation_id, created_at, id);
CREATE INDEX trial_monthly_api_key ON trial_monthly (api_key_id);
CREATE INDEX trial_monthly_trigger ON trial_monthly (trigger_id);
"""

REFUSED = {
    "a unique public id alone": "ALTER TABLE trial_monthly ADD CONSTRAINT trial_public_id_alone UNIQUE (public_id)",
    "a primary key of the id alone": (
        "CREATE TABLE trial_id_alone (id bigint PRIMARY KEY, created_at timestamptz) PARTITION BY RANGE (created_at)"
    ),
    "a delivery's foreign key to its message's id": (
        "ALTER TABLE conversations_delivery ADD CONSTRAINT trial_fk FOREIGN KEY (message_id) "
        "REFERENCES trial_monthly (id)"
    ),
}

# %(table)s: trial_plain or trial_monthly; the other values are the measured person's (history_at_scale's).
STATEMENTS = {
    "accept: INSERT one message": (
        "INSERT INTO {table} (public_id, conversation_id, role, source, text, api_key_id, created_at, test, outcome) "
        "VALUES ('msg_' || substr(md5(random()::text), 1, 24), %(conversation)s, 'user', 'api', 'hello', %(key)s, "
        "now(), false, '') RETURNING id"
    ),
    "receipt: by public id, the key's": (
        "SELECT m.*, d.status FROM {table} AS m LEFT JOIN conversations_delivery AS d ON d.message_id = m.id "
        "WHERE m.api_key_id = %(key)s AND m.public_id = %(public_id)s AND m.role = 'user' LIMIT 1"
    ),
    "a message by id alone": "SELECT * FROM {table} WHERE id = %(id)s",
    "a message by id and its time (an id that carries it)": (
        "SELECT * FROM {table} WHERE id = %(id)s AND created_at = %(middle_at)s"
    ),
    "the thread's newest page": (
        "SELECT * FROM {table} WHERE conversation_id = %(conversation)s AND NOT test "
        "ORDER BY created_at DESC, id DESC LIMIT 101"
    ),
    "the poll since a burst": (
        "SELECT * FROM {table} WHERE conversation_id = %(conversation)s AND NOT test AND created_at >= %(since)s "
        "ORDER BY created_at DESC, id DESC LIMIT 100"
    ),
    "Earlier messages (the thread's middle)": (
        "SELECT * FROM {table} WHERE conversation_id = %(conversation)s AND NOT test "
        "AND (created_at, id) < (%(middle_at)s, %(id)s) ORDER BY created_at DESC, id DESC LIMIT 101"
    ),
    "the key's list: deliveries and their messages": (
        "SELECT d.id, d.status, m.public_id, m.created_at FROM conversations_delivery AS d "
        "JOIN {table} AS m ON m.id = d.message_id WHERE d.api_key_id = %(key)s "
        "AND d.endpoint IN ('api_message', 'legacy_webhook') ORDER BY d.id DESC LIMIT 51"
    ),
    "the admin's newest first": "SELECT * FROM {table} ORDER BY id DESC LIMIT 51",
}

BATCH = """
DELETE FROM trial_plain WHERE id IN (
    SELECT id FROM trial_plain WHERE created_at < %(end)s ORDER BY id LIMIT 1000)
"""


def run_script(db: psycopg.Connection[Any], script: str) -> float:
    started = time.perf_counter()
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)
    return round(time.perf_counter() - started, 1)


def months(db: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """The calendar months from the oldest message's to next month's: each partition's bounds."""
    rows = db.execute(
        "SELECT to_char(m, 'YYYY-MM-DD'), to_char(m + interval '1 month', 'YYYY-MM-DD') FROM generate_series("
        "date_trunc('month', (SELECT min(created_at) FROM trial_plain) AT TIME ZONE 'UTC'), "
        "date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month', interval '1 month') AS m"
    ).fetchall()
    return [(start, end) for start, end in rows]


def build(db: psycopg.Connection[Any]) -> dict[str, Any]:
    db.execute("SET maintenance_work_mem = '256MB'")
    log = {"plain copy": run_script(db, PLAIN)}
    db.execute("SELECT setval(pg_get_serial_sequence('trial_plain', 'id'), (SELECT max(id) FROM trial_plain))")
    started = time.perf_counter()
    run_script(db, MONTHLY)
    bounds = months(db)
    for start, end in bounds:
        name = "trial_monthly_" + start[:7].replace("-", "_")
        db.execute(
            f"CREATE TABLE {name} PARTITION OF trial_monthly FOR VALUES FROM ('{start} 00:00+00') TO ('{end} 00:00+00')"
        )
    db.execute("INSERT INTO trial_monthly SELECT * FROM trial_plain ORDER BY id")
    db.execute("SELECT setval(pg_get_serial_sequence('trial_monthly', 'id'), (SELECT max(id) FROM trial_plain))")
    log["partitioned copy"] = round(time.perf_counter() - started, 1)
    log["vacuum analyze"] = run_script(db, "VACUUM ANALYZE trial_plain; VACUUM ANALYZE trial_monthly")
    return {"seconds": log, "partitions": len(bounds), "first_month": bounds[0][0]}


def refusals(db: psycopg.Connection[Any]) -> dict[str, str]:
    said = {}
    for name, statement in REFUSED.items():
        try:
            with db.transaction(force_rollback=True):
                db.execute(statement)
            said[name] = "accepted"
        except psycopg.Error as error:
            said[name] = str(error).splitlines()[0]
    return said


def plan_of(db: psycopg.Connection[Any], sql: str, values: dict[str, Any]) -> dict[str, Any]:
    with db.transaction(force_rollback=True):
        plan = db.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, values).fetchone()[0][0]  # type: ignore[index]
    relations: list[str] = []
    _relations(plan["Plan"], relations)
    return {
        "planning_ms": round(plan["Planning Time"], 2),
        "execution_ms": round(plan["Execution Time"], 2),
        "buffers": plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0),
        "message_tables_read": len([name for name in relations if name.startswith("trial_")]),
        "scans": sorted(set(relations)),
    }


def _relations(node: dict[str, Any], found: list[str]) -> None:
    """The tables the plan read: a partition skipped at run time ("never executed") is not one."""
    if "Relation Name" in node and node.get("Actual Loops", 0) > 0:
        found.append(node["Relation Name"])
    for child in node.get("Plans", []):
        _relations(child, found)


def timed(db: psycopg.Connection[Any], sql: str, values: dict[str, Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        db.execute(sql, values).fetchall()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def compare(db: psycopg.Connection[Any], values: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    results = []
    for name, statement in STATEMENTS.items():
        row: dict[str, Any] = {"statement": name}
        for table in ("trial_plain", "trial_monthly"):
            sql = statement.replace("{table}", table)
            row[table] = {"ms": timed(db, sql, values, repeat), **plan_of(db, sql, values)}
        plain, monthly = row["trial_plain"], row["trial_monthly"]
        print(
            f"{name[:46]:46} plain {plain['ms']:>8.2f} ms {plain['buffers']:>6} buf | monthly {monthly['ms']:>8.2f} ms "
            f"{monthly['buffers']:>6} buf, planning {monthly['planning_ms']} ms, "
            f"{monthly['message_tables_read']} partition(s) read",
            flush=True,
        )
        results.append(row)
    return results


def retention(db: psycopg.Connection[Any], first_month: str) -> dict[str, Any]:
    """The oldest month gone: its partition detached and dropped, against its rows deleted in batches."""
    end = (
        db.execute("SELECT to_char(%s::date + interval '1 month', 'YYYY-MM-DD')", [first_month]).fetchone()[0]  # type: ignore[index]
        + " 00:00+00"
    )
    rows = db.execute("SELECT count(*) FROM trial_plain WHERE created_at < %s", [end]).fetchone()[0]  # type: ignore[index]
    name = "trial_monthly_" + first_month[:7].replace("-", "_")
    started = time.perf_counter()
    db.execute(f"ALTER TABLE trial_monthly DETACH PARTITION {name} CONCURRENTLY")
    detached = time.perf_counter() - started
    db.execute(f"DROP TABLE {name}")
    dropped = time.perf_counter() - started
    started, batches, batch_times = time.perf_counter(), 0, []
    while True:
        began = time.perf_counter()
        deleted = db.execute(BATCH, {"end": end}).rowcount
        batch_times.append(time.perf_counter() - began)
        batches += 1
        if deleted < 1000:
            break
    deleting = time.perf_counter() - started
    result = {
        "rows": rows, "detach_ms": round(detached * 1000, 1), "detach_and_drop_ms": round(dropped * 1000, 1),
        "batched_delete_s": round(deleting, 1), "batches": batches,
        "batch_p50_ms": round(statistics.median(batch_times) * 1000, 1),
        "batch_max_ms": round(max(batch_times) * 1000, 1),
    }  # fmt: skip
    print(f"retention of {rows:,} rows (the oldest month): {result}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="bench_history", help="the history bench/history_at_scale.py kept")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each statement (default 5)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args()
    url = harness.SERVER_URL.rsplit("/", 1)[0] + "/" + args.database
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with psycopg.connect(url, autocommit=True) as db:
        built = db.execute("SELECT built FROM bench_history").fetchone()[0]  # type: ignore[index]
        values = built["values"]
        middle = db.execute(
            "SELECT id, public_id, created_at FROM conversations_message WHERE conversation_id = %s AND role = 'user' "
            "AND api_key_id = %s AND id >= %s ORDER BY id LIMIT 1",
            [values["conversation"], values["key"], values["last_pair"] // 2],
        ).fetchone()
        since = db.execute("SELECT min(created_at) FROM conversations_message WHERE id > %s", [values["last_pair"]])
        assert middle is not None
        measured = {
            "conversation": values["conversation"], "key": values["key"], "id": middle[0], "public_id": middle[1],
            "middle_at": middle[2], "since": since.fetchone()[0],  # type: ignore[index]
        }  # fmt: skip
        results["built"] = build(db)
        print(f"built: {results['built']}", flush=True)
        results["refused"] = refusals(db)
        for name, said in results["refused"].items():
            print(f"{name}: {said}", flush=True)
        results["statements"] = compare(db, measured, args.repeat)
        results["retention"] = retention(db, results["built"]["first_month"])
        db.execute("DROP TABLE IF EXISTS trial_plain, trial_monthly CASCADE")
    results["load_average_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1, default=str)


if __name__ == "__main__":
    main()
