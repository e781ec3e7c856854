"""Database work for threads that must not hold a database connection of their own.

The delivery engine runs up to DELIVERY_CONCURRENCY attempts at once, each on a thread that waits on the assistant
for seconds or minutes. Were each of those threads to query (a tool call recording what it did, a reminder being
scheduled), each would open a connection of its own and keep it: DELIVERY_CONCURRENCY more per process, never
closed. Instead an attempt runs inside ``attempt_thread()``, and whatever it must do in the database goes through
``database(fn, ...)``, which hands ``fn`` to a small pool of DELIVERY_DATABASE_THREADS threads (one connection
each, opened when first needed) and waits for its result. Outside an attempt thread (a web request, a management
command, a test) ``database`` just calls ``fn``: there the calling thread already has its connection.

So a worker process holds at most 1 (claimer) + DELIVERY_RECORDERS + DELIVERY_DATABASE_THREADS connections
(+1 for django.tasks' loop in ``manage.py worker``), however many attempts are in flight
(tests/test_attempt_threads.py counts them).
"""

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import partial

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

THREAD_PREFIX = "database-work"

_local = threading.local()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@contextmanager
def attempt_thread() -> Iterator[None]:
    """Mark the current thread as one that must not touch the database while inside the block."""
    before = getattr(_local, "attempting", False)
    _local.attempting = True
    try:
        yield
    finally:
        _local.attempting = before


def database[**P, T](fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` where a database connection may be used: on the pool from an attempt thread, else right here.
    Its exception, if any, is raised here."""
    if not getattr(_local, "attempting", False):
        return fn(*args, **kwargs)
    return _executor().submit(_on_pool_thread, partial(fn, *args, **kwargs)).result()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(settings.DELIVERY_DATABASE_THREADS, 1), thread_name_prefix=THREAD_PREFIX)
        return _pool


def _on_pool_thread[**P, T](fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    close_old_connections()  # a connection past CONN_MAX_AGE, or broken by the previous piece of work, is replaced
    try:
        return fn(*args, **kwargs)
    except DatabaseError:
        connection.close()
        raise
    finally:
        if connection.settings_dict.get("OPTIONS", {}).get("pool"):
            connection.close()  # a shared pool (DATABASE_POOL_SIZE): give the connection back between pieces


def shutdown() -> None:
    """Stop the pool's threads (their connections close with them); a later ``database`` call starts it again."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    threads = max(settings.DELIVERY_DATABASE_THREADS, 1)
    everyone = threading.Barrier(threads)

    def close() -> None:  # one on each thread: each waits until all have theirs
        connection.close()
        with suppress(threading.BrokenBarrierError):
            everyone.wait(timeout=2)

    for _ in range(threads):
        pool.submit(close)
    pool.shutdown(wait=True)
