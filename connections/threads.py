"""One piece of blocking work in a thread of its own, for its result or its exception.

For work the calling thread cannot run itself (an event loop where one may already be running) or cannot bound
(a library call without a deadline of its own: the caller stops waiting, the daemon thread ends when the call does).
"""

import threading
from collections.abc import Callable


class StillRunning(Exception):
    """The work had not finished when the caller stopped waiting; its thread is left to end on its own."""


def in_own_thread[T](work: Callable[[], T], *, name: str, seconds: float | None = None) -> T:
    """``work()``'s result, or its exception raised here; StillRunning after ``seconds`` (None: wait as long as
    it takes)."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(work())
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise StillRunning(name)
    if failure:
        error = failure.pop()  # not left in the list: the list, its exception and this frame would form a cycle
        try:
            raise error
        finally:
            del error
    return outcome[0]
