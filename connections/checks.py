"""How many checks of a remote server (connect, list what it offers) may run at once inside web requests.

A check holds its request's thread until the server answers or MCP_CHECK_TIMEOUT_SECONDS pass; a gunicorn worker has
only WEB_THREADS of them. Ten adds pointed at a server that never answers once took every thread of a worker, and an
unrelated request waited 13 s. So a check needs a slot: at most MCP_CHECKS_PER_PROCESS at once in this process (well
below its thread count) and MCP_CHECKS_PER_ACCOUNT at once for one account, across processes (counted in the
cache). Without a free slot the caller is refused at once (``ChecksBusy``), never queued behind the others.

Any check of a remote server made while a person waits goes through ``check_slot`` (MCP connections today).
"""

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache


class ChecksBusy(Exception):
    """No slot for a check; ``whole_process`` when this process is busy rather than the account, ``wait`` the
    seconds worth waiting before trying again."""

    def __init__(self, message: str, *, whole_process: bool, wait: int) -> None:
        super().__init__(message)
        self.whole_process = whole_process
        self.wait = wait


_lock = threading.Lock()
_in_process = 0


@contextmanager
def _process_slot() -> Iterator[None]:
    global _in_process
    with _lock:
        if _in_process >= settings.MCP_CHECKS_PER_PROCESS:
            raise ChecksBusy(
                "This server is busy checking other connections; nothing was added. Try again in a few seconds.",
                whole_process=True,
                wait=_wait(),
            )
        _in_process += 1
    try:
        yield
    finally:
        with _lock:
            _in_process -= 1


@contextmanager
def _account_slot(owner_id: int) -> Iterator[None]:
    key = f"connection-checks:{owner_id}"
    # The count expires by itself in case a process dies holding a slot; a check never outlives its deadline.
    if _take(key) > settings.MCP_CHECKS_PER_ACCOUNT:
        _release(key)
        raise ChecksBusy(
            "Another check of one of your connections is still running; wait for it to finish, then try again.",
            whole_process=False,
            wait=_wait(),
        )
    try:
        yield
    finally:
        _release(key)


def _take(key: str) -> int:
    """Count one more check for the key; the count (its expiry set when created) outlives no check by much."""
    for _ in range(2):
        cache.add(key, 0, timeout=int(settings.MCP_CHECK_TIMEOUT_SECONDS) + 30)
        with contextlib.suppress(ValueError):  # expired between the two calls: create it again
            return int(cache.incr(key))
    return 1  # the cache keeps losing it: count this check alone rather than fail the request


def _release(key: str) -> None:
    with contextlib.suppress(ValueError):  # expired meanwhile: nothing left to give back
        cache.decr(key)


def _wait() -> int:
    return max(1, int(settings.MCP_CHECK_TIMEOUT_SECONDS + 0.999))


@contextmanager
def check_slot(owner_id: int) -> Iterator[None]:
    """Hold one of the account's and one of the process's check slots for the block, or raise ChecksBusy."""
    with _account_slot(owner_id), _process_slot():
        yield
