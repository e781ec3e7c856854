"""What a stretch of work cost, from outside the processes that did it: PostgreSQL's counters for one database
(pg_stat_database, pg_stat_user_tables), the CPU of that database's backends and of the app's processes (/proc), the
WAL its transactions wrote (pg_walinspect, read from the database itself: WalWindow), and the statements the app's
processes sent (bench/statement_probe). bench/capacity.py divides each by the units of work done.

PostgreSQL 15 needs no restart or server setting for any of it: pg_walinspect is created in the measured database
only. Its counters reach pg_stat_database when a backend reports them, at most once a second and, for an idle
backend, up to 10 s after its last transaction: ``settle`` waits that out before a snapshot.
"""

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench.harness import cpu_seconds

STATS_SETTLE_SECONDS = 11.0
# The application_name of the benchmark's own connection, whose backend's CPU is not the service's.
MONITOR = "capacity-monitor"
DATABASE_COUNTERS = (
    "xact_commit", "xact_rollback", "blks_read", "blks_hit", "tup_returned", "tup_fetched", "tup_inserted",
    "tup_updated", "tup_deleted", "temp_bytes", "active_time",
)  # fmt: skip
TABLE_COUNTERS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "seq_scan", "idx_scan")


@dataclass
class Snapshot:
    database: dict[str, float]
    tables: dict[str, dict[str, int]]
    backends: dict[int, float]  # CPU seconds of each client backend of the database
    processes: dict[str, float]  # CPU seconds of each group of the app's processes
    statements: dict[str, dict[str, Any]]  # the probe's totals per role
    at: float = field(default_factory=time.monotonic)


class CostMeter:
    """``groups``: a name for each group of the app's processes, and how to list their pids now."""

    def __init__(
        self,
        database_url: str,
        groups: dict[str, Callable[[], list[int]]],
        probe_dir: Path,
        settle_seconds: float = STATS_SETTLE_SECONDS,
    ) -> None:
        self.url, self.groups, self.probe_dir, self.settle_seconds = database_url, groups, probe_dir, settle_seconds
        self.name = urlsplit(database_url).path.lstrip("/")
        self.server = urlunsplit(urlsplit(database_url)._replace(path="/postgres"))
        with psycopg.connect(database_url, autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            self.oid = db.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]  # type: ignore[index]

    def settle(self) -> None:
        time.sleep(self.settle_seconds)

    def snapshot(self) -> Snapshot:
        # Read from another database, so that reading adds nothing to this one's counters (the tables' apart).
        with psycopg.connect(self.server, autocommit=True) as db:
            row = db.execute(
                f"SELECT {', '.join(DATABASE_COUNTERS)} FROM pg_stat_database WHERE datname = %s", [self.name]
            ).fetchone()
            backends = db.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' "
                "AND application_name <> %s",
                [self.name, MONITOR],
            ).fetchall()
        with psycopg.connect(self.url, autocommit=True) as db:
            tables = {
                name: dict(zip(TABLE_COUNTERS, values, strict=True))
                for name, *values in db.execute(f"SELECT relname, {', '.join(TABLE_COUNTERS)} FROM pg_stat_user_tables")
            }
        assert row is not None
        return Snapshot(
            database=dict(zip(DATABASE_COUNTERS, (float(v or 0) for v in row), strict=True)),
            tables=tables,
            backends={pid: cpu_seconds([pid]) for (pid,) in backends},
            processes={name: cpu_seconds(pids()) for name, pids in self.groups.items()},
            statements=self._probe_totals(),
        )

    def _probe_totals(self) -> dict[str, dict[str, Any]]:
        roles: dict[str, dict[str, Any]] = {}
        for path in self.probe_dir.glob("*.json"):
            role = path.stem.rsplit("-", 1)[0]
            found = json.loads(path.read_text())
            total = roles.setdefault(role, {"kinds": {}, "seconds": 0.0})
            total["seconds"] += found["seconds"]
            for kind, count in found["kinds"].items():
                total["kinds"][kind] = total["kinds"].get(kind, 0) + count
        return roles

    def wal_window(self) -> "WalWindow":
        return WalWindow(self)


class WalWindow:
    """The WAL this database's transactions write from its start to ``read()``. A temporary replication slot, held
    by a session of its own until ``read()``, keeps the server from recycling those segments meanwhile (other
    databases on a busy server fill a 1 GB max_wal_size in seconds); the slot goes with the session, so nothing is
    left on the server. Read soon after the work is done: the slot holds back every database's WAL while it lives."""

    def __init__(self, meter: CostMeter) -> None:
        self.meter = meter
        self.session = psycopg.connect(meter.server, autocommit=True)
        self.session.execute(
            "SELECT pg_create_physical_replication_slot(%s, true, true)", [f"capacity_{os.getpid()}_{id(self)}"]
        )
        self.start = self.session.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]  # type: ignore[index]
        self.end = self.start

    def stop(self) -> None:
        """The end of the work: what is written after this is not counted."""
        self.end = self.session.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]  # type: ignore[index]

    def read(self) -> dict[str, int]:
        """The WAL records from the start to the stop that touched this database's blocks, with the commit records
        of their transactions; the server's whole WAL over the same span beside them (other databases' too). Read
        after the snapshot that ends the work's counters: reading is work in this database too."""
        try:
            if lsn_bytes(self.end) <= lsn_bytes(self.start):  # nothing written: nothing to read
                return {"records": 0, "bytes": 0, "full_page_bytes": 0, "server_bytes": 0}
            mine = f"% rel %/{self.meter.oid}/%"
            with psycopg.connect(self.meter.url, autocommit=True) as db:
                row = db.execute(
                    "WITH r AS (SELECT * FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)), "
                    "x AS (SELECT DISTINCT xid FROM r WHERE block_ref LIKE %s AND xid <> '0') "
                    "SELECT count(*), coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0) FROM r "
                    "WHERE block_ref LIKE %s OR xid IN (SELECT xid FROM x)",
                    [self.start, self.end, mine, mine],
                ).fetchone()
        finally:
            self.session.close()
        assert row is not None
        server = lsn_bytes(self.end) - lsn_bytes(self.start)
        return {"records": row[0], "bytes": int(row[1]), "full_page_bytes": int(row[2]), "server_bytes": server}


def lsn_bytes(lsn: str) -> int:
    high, low = lsn.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def difference(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """What happened between two snapshots: counters, CPU seconds and statements, in total."""
    backend_cpu = sum(seconds - before.backends.get(pid, 0.0) for pid, seconds in after.backends.items())
    tables: dict[str, dict[str, int]] = {}
    for name, counters in after.tables.items():
        changed = {k: v - before.tables.get(name, {}).get(k, 0) for k, v in counters.items()}
        if any(changed.values()):
            tables[name] = changed
    statements = {}
    for role, total in after.statements.items():
        earlier = before.statements.get(role, {"kinds": {}, "seconds": 0.0})
        kinds = {k: n - earlier["kinds"].get(k, 0) for k, n in total["kinds"].items()}
        statements[role] = {
            "kinds": {k: n for k, n in kinds.items() if n},
            "seconds": total["seconds"] - earlier["seconds"],
        }
    return {
        "seconds": after.at - before.at,
        "database": {k: after.database[k] - before.database[k] for k in DATABASE_COUNTERS},
        "tables": tables,
        "backend_cpu_seconds": backend_cpu,
        "backends_gone": len(set(before.backends) - set(after.backends)),
        "process_cpu_seconds": {k: after.processes[k] - before.processes.get(k, 0.0) for k in after.processes},
        "statements": statements,
    }


def per_unit(spent: dict[str, Any], wal: dict[str, int], units: int) -> dict[str, Any]:
    """The costs of one unit of work, from what ``units`` of them spent together."""
    n = max(units, 1)
    database = spent["database"]
    statements = sum(sum(role["kinds"].values()) for role in spent["statements"].values())
    control = sum(
        count
        for role in spent["statements"].values()
        for kind, count in role["kinds"].items()
        if kind in ("COMMIT", "ROLLBACK", "BEGIN", "SAVEPOINT", "RELEASE")
    )
    return {
        "units": units,
        "app_cpu_ms": {k: round(1000 * v / n, 3) for k, v in spent["process_cpu_seconds"].items()},
        "database_cpu_ms": round(1000 * spent["backend_cpu_seconds"] / n, 3),
        "statements": round((statements - control) / n, 2),
        "transaction_control": round(control / n, 2),
        "statement_client_ms": round(1000 * sum(role["seconds"] for role in spent["statements"].values()) / n, 3),
        "database_active_ms": round(database["active_time"] / n, 3),
        "transactions": round((database["xact_commit"] + database["xact_rollback"]) / n, 2),
        "buffers_hit": round(database["blks_hit"] / n, 1),
        "buffers_read": round(database["blks_read"] / n, 2),
        "rows_scanned": round(database["tup_returned"] / n, 1),
        "rows_fetched": round(database["tup_fetched"] / n, 1),
        "rows_written": round((database["tup_inserted"] + database["tup_updated"] + database["tup_deleted"]) / n, 2),
        "wal_bytes": round(wal["bytes"] / n),
        "wal_bytes_without_full_pages": round((wal["bytes"] - wal["full_page_bytes"]) / n),
        "wal_records": round(wal["records"] / n, 2),
    }
