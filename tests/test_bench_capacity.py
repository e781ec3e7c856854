"""The cost collector behind docs/explanation/capacity.md (bench/cost_meter.py): what a stretch of work cost the
database, counted from outside the connection that did it: rows and transactions from pg_stat_database and
pg_stat_user_tables, the WAL its transactions wrote (pg_walinspect), and the statements the app's processes counted
(bench/statement_probe), each per unit of work."""

import json
import os
import time
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection

from bench.cost_meter import CostMeter, difference, lsn_bytes, per_unit

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="the collector reads PostgreSQL's own counters and WAL (set DATABASE_URL to a PostgreSQL database)",
)

ROWS = 200


def database_url() -> str:
    s = connection.settings_dict
    password = f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else ""
    return f"postgres://{quote(s['USER'])}{password}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture
def meter(transactional_db, tmp_path):
    url = database_url()
    with psycopg.connect(url, autocommit=True) as db:
        available = db.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_walinspect'").fetchone()
        if available is None:
            pytest.skip("pg_walinspect (PostgreSQL's contrib) is not installed on this server")
        db.execute("CREATE TABLE capacity_rows (id bigint PRIMARY KEY, body text)")
    yield CostMeter(url, {"this process": lambda: [os.getpid()]}, tmp_path, settle_seconds=0)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE capacity_rows")


def probe_file(folder, role: str, pid: int, kinds: dict[str, int], seconds: float) -> None:
    (folder / f"{role}-{pid}.json").write_text(json.dumps({"kinds": kinds, "seconds": seconds}))


def write_rows(url: str) -> None:
    """The unit of work: one row in its own transaction, on a connection that then ends (and so reports its
    counters at once, where an idle one would wait up to 10 s)."""
    with psycopg.connect(url) as db:
        for n in range(ROWS):
            db.execute("INSERT INTO capacity_rows VALUES (%s, %s)", [n, "x" * 100])
            db.commit()


def after_counters_arrive(meter: CostMeter, inserted_before: float):
    """A snapshot once the writer's counters are in (a backend reports them as it exits: within moments)."""
    ends = time.monotonic() + 5
    while True:
        found = meter.snapshot()
        if found.database["tup_inserted"] - inserted_before >= ROWS or time.monotonic() > ends:
            return found
        time.sleep(0.1)


def test_rows_transactions_wal_and_statements_per_unit(meter, tmp_path):
    probe_file(tmp_path, "web", 1, {"INSERT": 5}, 0.5)
    before = meter.snapshot()
    window = meter.wal_window()
    write_rows(meter.url)
    window.stop()
    probe_file(tmp_path, "web", 1, {"INSERT": 5 + ROWS, "COMMIT": ROWS}, 0.5 + ROWS * 0.001)
    probe_file(tmp_path, "web", 2, {"SELECT": ROWS}, ROWS * 0.001)  # a second process of the same role
    after = after_counters_arrive(meter, before.database["tup_inserted"])
    wal = window.read()

    spent = difference(before, after)
    assert spent["database"]["tup_inserted"] >= ROWS
    assert spent["database"]["xact_commit"] >= ROWS
    assert spent["tables"]["capacity_rows"]["n_tup_ins"] == ROWS
    assert spent["statements"]["web"]["kinds"] == {"INSERT": ROWS, "COMMIT": ROWS, "SELECT": ROWS}

    # Each row: a heap tuple, an index entry, a commit record, ~100 bytes of text: more than 100 bytes of WAL and,
    # however busy the rest of the server, never more than all of it.
    assert wal["records"] >= 3 * ROWS
    assert 100 * ROWS < wal["bytes"] <= wal["server_bytes"]

    unit = per_unit(spent, wal, ROWS)
    assert unit["statements"] == 2  # the INSERT and the SELECT; the COMMIT is transaction control
    assert unit["transaction_control"] == 1
    assert unit["rows_written"] >= 1
    assert unit["wal_bytes"] == round(wal["bytes"] / ROWS)


def test_a_window_with_no_write_reads_no_wal(meter):
    window = meter.wal_window()
    window.stop()
    found = window.read()
    assert found["bytes"] == 0  # nothing of this database's, whatever the server wrote meanwhile


def test_lsn_arithmetic():
    assert lsn_bytes("0/10") == 16
    assert lsn_bytes("1/0") - lsn_bytes("0/FFFFFFFF") == 1
