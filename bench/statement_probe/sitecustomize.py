"""Counts the SQL a benchmarked process sends (bench/capacity.py puts this folder on PYTHONPATH, so Python imports it
at start-up in every process of the service it starts: gunicorn's workers, `manage.py worker`).

Every statement through psycopg's cursor is counted by its first word and timed on the client (the round trip: the
server's work and the wait for the answer); every commit and rollback too (psycopg sends BEGIN by itself). Each
process writes its totals to CAPACITY_PROBE_DIR/<CAPACITY_PROBE_ROLE>-<pid>.json from a thread of its own, ten
times a second while they change. Without CAPACITY_PROBE_DIR nothing is changed. The cost, about a microsecond a
statement, is in the CPU the benchmark measures.
"""

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

FOLDER = os.environ.get("CAPACITY_PROBE_DIR", "")


class Totals:
    """This process's counts; a fork starts its own (gunicorn forks its workers from a master that has counted)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.kinds: dict[str, int] = {}
        self.seconds = 0.0
        self.lock = threading.Lock()
        self.changed = threading.Event()
        threading.Thread(target=self._write_while_changing, daemon=True).start()

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            self.seconds += seconds
        self.changed.set()

    def _write_while_changing(self) -> None:
        path = Path(FOLDER) / f"{os.environ.get('CAPACITY_PROBE_ROLE', 'other')}-{self.pid}.json"
        while True:
            self.changed.wait()
            self.changed.clear()
            with self.lock:
                text = json.dumps({"kinds": self.kinds, "seconds": self.seconds})
            path.with_suffix(".tmp").write_text(text)
            path.with_suffix(".tmp").replace(path)
            time.sleep(0.1)


_totals: Totals | None = None
_making = threading.Lock()


def totals() -> Totals:
    """One Totals a process, whichever thread sends its first statement (two would write one file)."""
    global _totals
    found = _totals
    if found is not None and found.pid == os.getpid():
        return found
    with _making:
        if _totals is None or _totals.pid != os.getpid():
            _totals = Totals()
        return _totals


def first_word(query: Any) -> str:
    text = query.decode(errors="replace") if isinstance(query, bytes) else query if isinstance(query, str) else ""
    words = text.lstrip(" (\n").split(None, 1)
    return words[0].upper() if words else "OTHER"


def install() -> None:
    import psycopg

    def counted(method: Any, kind_of: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                totals().add(kind_of(args), time.perf_counter() - started)

        return wrapper

    psycopg.Cursor.execute = counted(psycopg.Cursor.execute, lambda args: first_word(args[0]))  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted(psycopg.Cursor.executemany, lambda args: first_word(args[0]))  # type: ignore[method-assign]
    psycopg.Connection.commit = counted(psycopg.Connection.commit, lambda args: "COMMIT")  # type: ignore[method-assign]
    psycopg.Connection.rollback = counted(psycopg.Connection.rollback, lambda args: "ROLLBACK")  # type: ignore[method-assign]


if FOLDER:
    install()
