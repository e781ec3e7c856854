"""Bounds on what we read from servers other people run: at most so many bytes, and nothing after a deadline,
whatever the answer's framing (a Content-Length, chunks without end, no length at all, one byte a second).

One ``Bound`` per exchange (or per session of several requests that share one budget): every byte the protocol
client reads is counted by ``spend``; past the budget or the deadline the reading stops with ``TooLarge`` or
``TooSlow``, and the caller closes the connection. A socket handed to ``watch`` is shut down when the deadline
passes, so a read blocked on a server that trickles returns at once and no thread goes on reading after its caller
gave up (a socket timeout bounds one read, not the exchange).

The protocol clients reach it through small adapters here:

- requests and niquests (CalDAV, Twilio): ``bound_session`` wraps a session's transport adapters so that every
  answer's body is read through a bound before the library (or its redirect handling) sees it;
- file objects (imaplib, smtplib): ``BoundedFile``;
- httpx streams (MCP): connections/client.py's stream, through ``Bound.spend``;
- http.client (the assistant runtime, the JSON providers): ``Bound.watch`` and ``Bound.spend`` directly.

Every bound also draws on one budget shared by the whole process (``PROCESS_MAX_ANSWER_BYTES``): what all the
exchanges under way hold together. A read that would take it past that fails at once with ``Busy`` (a ``TooLarge``
whose sentence says the server is busy), and a bound gives its bytes back when its exchange ends (``release``, the
end of its ``with`` block, or at the latest when it is garbage-collected). Each bound alone holds; this keeps their
sum bounded too, however many threads read at once.

What each bound is set to, and why, is listed in docs/explanation/limits.md.
"""

import contextlib
import contextvars
import ctypes
import gc
import heapq
import logging
import os
import socket
import threading
import time
import weakref
from types import TracebackType
from typing import Any

from django.conf import settings

from ops import session_internals

log = logging.getLogger("ops.bounded")

CHUNK_BYTES = 64 * 1024  # read at a time from a response body


class Exceeded(Exception):
    """The answer went past its bound; ``str()`` is a sentence for the person, ``read`` the bytes read by then."""

    def __init__(self, bound: "Bound", message: str) -> None:
        super().__init__(message)
        self.bound = bound
        self.read = bound.read


class TooLarge(Exceeded):
    """More bytes than the bound allows."""


class TooSlow(Exceeded):
    """The deadline passed before the answer was whole."""


class Busy(TooLarge):
    """The process is already holding as many bytes of answers as it may at once (PROCESS_MAX_ANSWER_BYTES): this
    answer was cut off, not because of its own size. Worth trying again later."""


def size_text(size: int) -> str:
    """A byte count as people read it: 1 MB, 10.5 MB, 64 kB."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.3g} MB"
    return f"{size / 1000:.3g} kB"


class _Held:
    """The bytes one bound has taken from the process's budget (kept apart from the bound, so that a finalizer can
    give them back without keeping the bound alive)."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0


class _ProcessBudget:
    """The bytes every bound of the process holds together, at most PROCESS_MAX_ANSWER_BYTES (read at each take,
    so a changed setting applies at once)."""

    def __init__(self) -> None:
        self.held = 0
        self._lock = threading.Lock()

    @staticmethod
    def limit() -> int:
        return int(getattr(settings, "PROCESS_MAX_ANSWER_BYTES", 50_000_000))

    def fits(self, size: int) -> bool:
        return self.held + size <= self.limit()

    def take(self, held: _Held, size: int) -> bool:
        """Add ``size`` bytes to what ``held`` holds, if the process has them to spare."""
        limit = self.limit()
        with self._lock:
            if self.held + size > limit:
                return False
            self.held += size
            held.bytes += size
            return True

    def give_back(self, held: _Held) -> int:
        """Return what ``held`` holds to the process; the number of bytes given back."""
        with self._lock:
            given, held.bytes = held.bytes, 0
            self.held -= given
        return given


process_budget = _ProcessBudget()

TRIM_AFTER_BYTES = 1_000_000  # an exchange that held this much hands the freed memory back to the system


_trim: Any = None  # glibc's malloc_trim; None with another C library
with contextlib.suppress(OSError, AttributeError):
    _trim = ctypes.CDLL(None).malloc_trim


class _Trimmer:
    """Hands the memory freed after large answers back to the system, a moment after the last of them ended: a
    full garbage collection (a session of the HTTP libraries is a cycle of small objects, and each pins pages
    around it), then glibc's malloc_trim (glibc keeps freed memory in each thread's arena for reuse). Without it a
    worker's resident memory grows with every thread that once read a large answer and stays there idle
    (docs/explanation/limits.md has the figures). Not at once, when a bound is released: its answer's buffers are
    often still referenced then (the exception on its way up, the response being parsed). At most once every
    ``INTERVAL`` seconds: the collection takes 0.1-0.3 s of a core in a large process, and a stream of hostile
    answers should not buy that more often."""

    DELAY = 0.5  # seconds after the large answer that asked for it
    INTERVAL = 2.0  # seconds between two runs, at least

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: threading.Timer | None = None
        self._last = -self.INTERVAL

    def soon(self) -> None:
        if _trim is None:
            return
        with self._lock:
            if self._pending is not None:
                return
            delay = max(self.DELAY, self._last + self.INTERVAL - time.monotonic())
            self._pending = threading.Timer(delay, self._run)
            self._pending.daemon = True
            self._pending.start()

    def _run(self) -> None:
        started = time.monotonic()
        gc.collect()
        collected = time.monotonic()
        _trim(0)
        with self._lock:
            self._pending = None
            self._last = time.monotonic()
        log.debug("bounded.trimmed: collection %.3f s, trim %.3f s", collected - started, self._last - collected)


_trimmer = _Trimmer()


_current: contextvars.ContextVar["Bound | None"] = contextvars.ContextVar("bound", default=None)


def current() -> "Bound | None":
    """The bound the running code entered with ``with bound:``, if any."""
    return _current.get()


class Bound:
    """A byte budget and a deadline for reading one server's answers. ``what`` names the server in the refusal
    ("The CalDAV server")."""

    def __init__(self, what: str, *, max_bytes: int, seconds: float) -> None:
        self.what = what
        self.max_bytes = max_bytes
        self.seconds = max(float(seconds), 0.0)
        self.ends_at = time.monotonic() + self.seconds
        self.read = 0
        self.exceeded: Exceeded | None = None
        self._watches: list[_Watch] = []
        self._lock = threading.Lock()
        self._token: contextvars.Token[Bound | None] | None = None
        self._held = _Held()
        self._closing: list[Any] = []
        # The bytes go back to the process when the exchange ends (release), or when a bound nobody released is freed.
        weakref.finalize(self, process_budget.give_back, self._held)

    # Counting ----------------------------------------------------------------------------------------------------

    def left(self) -> float:
        """Seconds until the deadline; TooSlow when it has passed."""
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise self._refuse(TooSlow)
        return left

    def spend(self, size: int) -> None:
        """Count ``size`` bytes just read; TooLarge past the budget, Busy past the process's, TooSlow past the
        deadline."""
        self.read += size
        if self.read > self.max_bytes:
            raise self._refuse(TooLarge)
        if not process_budget.take(self._held, size):
            raise self._refuse(Busy)
        if time.monotonic() >= self.ends_at:
            raise self._refuse(TooSlow)

    def announced(self, size: int) -> None:
        """An answer says it will be ``size`` bytes long: TooLarge (or Busy) now, unread, when that cannot fit."""
        if self.read + size > self.max_bytes:
            raise self._refuse(TooLarge)
        if not process_budget.fits(size):
            raise self._refuse(Busy)

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed (a watched socket was, or is about to be, shut down)."""
        return time.monotonic() >= self.ends_at or any(watch.fired for watch in self._watches)

    def refusal(self, kind: type[Exceeded]) -> str:
        """The sentence for the person: what was refused, and the bound it passed."""
        if kind is Busy:
            return (
                f"{self.what}'s answer was not read: this server is already reading "
                f"{size_text(process_budget.limit())} of other answers, the most it holds at once. Try again shortly."
            )
        if kind is TooLarge:
            return f"{self.what}'s answer is larger than {size_text(self.max_bytes)}, the most this server reads."
        return f"{self.what} did not answer in time."

    def explain(self, error: BaseException) -> Exceeded | None:
        """The bound an exception from the protocol client comes from: itself when it is one, TooSlow when the
        deadline shut the socket under the client (which then reports a reset or a closed connection), else None."""
        if isinstance(error, Exceeded):
            return error
        if self.exceeded is not None:
            return self.exceeded
        if self.expired:
            return self._refuse(TooSlow)
        return None

    def _refuse(self, kind: type[Exceeded]) -> Exceeded:
        if self.exceeded is None:
            self.exceeded = kind(self, self.refusal(kind))
            # The figures are in the message: the JSON log keeps the message, not extra fields.
            log.warning(
                "bounded.refused: %s, %s after reading %d bytes (at most %d, %.1f s; the process holds %d of %d)",
                self.what,
                kind.__name__,
                self.read,
                self.max_bytes,
                self.seconds,
                process_budget.held,
                process_budget.limit(),
            )
        return self.exceeded

    # Watching sockets --------------------------------------------------------------------------------------------

    def watch(self, sock: socket.socket) -> socket.socket:
        """Shut the socket's connection down at the deadline (at once if it has passed). Works for a TLS socket,
        and goes on working when a library wraps or replaces the socket object (STARTTLS): it holds its own
        descriptor of the connection, released when the bound's ``with`` block ends (or ``release``)."""
        try:
            duplicate = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return sock  # already closed: nothing to watch
        watch = _Watch(duplicate)
        with self._lock:
            self._watches.append(watch)
        _deadlines.add(watch, self.ends_at)
        return sock

    def close_at_end(self, resource: Any) -> None:
        """Close ``resource`` (a session, a client) when the exchange ends: its connections and buffers are freed
        then, not when the garbage collector next finds the cycles such objects form."""
        with self._lock:
            self._closing.append(resource)

    def release(self) -> None:
        """Stop watching this bound's sockets, close what was handed to ``close_at_end`` and give the bound's bytes
        back to the process (the exchange is over)."""
        with self._lock:
            closing, self._closing = self._closing, []
        for resource in closing:
            with contextlib.suppress(Exception):  # closing what failed may fail too; nothing more to free
                resource.close()
        if process_budget.give_back(self._held) >= TRIM_AFTER_BYTES:
            _trimmer.soon()
        if self.exceeded is not None:
            # The refusal's traceback holds the frames that read (and this bound, in them): a cycle that would keep
            # their buffers until the garbage collector's next full pass. The sentence is all callers need.
            self.exceeded.__traceback__ = None
            self.exceeded.__context__ = None  # the library's error it replaced, with its own traceback
        with self._lock:
            watches, self._watches = self._watches, []
        for watch in watches:
            watch.release()

    def __enter__(self) -> "Bound":
        self._token = _current.set(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        self.release()


class _Watch:
    __slots__ = ("done", "duplicate", "fired", "lock")

    def __init__(self, duplicate: socket.socket) -> None:
        self.duplicate = duplicate
        self.done = False
        self.fired = False
        self.lock = threading.Lock()

    def fire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.fired = True
            with contextlib.suppress(OSError):  # the other side closed it already
                self.duplicate.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        with self.lock:
            if not self.done:
                self.done = True
                self.duplicate.close()


class _Deadlines:
    """One thread for the process that fires each watch at its deadline: a heap, no thread per exchange."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Watch]] = []
        self._counter = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: _Watch, ends_at: float) -> None:
        with self._changed:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="bounded-deadlines", daemon=True)
                self._thread.start()
            self._counter += 1
            heapq.heappush(self._heap, (ends_at, self._counter, watch))
            if self._heap[0][2] is watch:
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while True:
                    # Watches released before their deadline (nearly all: the answer came in time) have nothing to
                    # fire: dropped without waiting for their deadlines, so that the thread wakes for the next live
                    # one, not once for every exchange (300 times a second under the channel worker's sends).
                    while self._heap and self._heap[0][2].done:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        break
                    self._changed.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                _, _, watch = heapq.heappop(self._heap)
            watch.fire()


_deadlines = _Deadlines()


# Adapters for the protocol clients ----------------------------------------------------------------------------------


class BoundedFile:
    """A binary file object (what ``socket.makefile`` returns) whose reads are counted: for line-oriented clients
    (imaplib, smtplib) that keep every line a server sends until its reply ends."""

    def __init__(self, raw: Any, bound: Bound) -> None:
        self._raw = raw
        self._bound = bound

    def readline(self, limit: int = -1) -> bytes:
        line: bytes = self._raw.readline(limit)
        self._bound.spend(len(line))
        return line

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._raw.read(size)
        self._bound.spend(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _seconds(timeout: Any, fallback: float) -> float:
    """The whole exchange's time from a requests-style timeout: a number, a (connect, read) pair, or nothing."""
    if isinstance(timeout, (int, float)):
        return float(timeout)
    if isinstance(timeout, tuple):
        numbers = [float(part) for part in timeout if isinstance(part, (int, float))]
        return max(numbers) if numbers else fallback
    return fallback


class _BoundedTransport:
    """Stands in for a requests/niquests transport adapter: the answer's body is read here, through the bound of the
    ``with`` block the caller entered (one budget for a session of requests) or a fresh one per request, before the
    session (its hooks, its redirect handling, the caller) reads it."""

    def __init__(self, inner: Any, what: str, max_bytes: int, seconds: float) -> None:
        self._inner = inner
        self._what = what
        self._max_bytes = max_bytes
        self._seconds = seconds

    def send(self, request: Any, **kwargs: Any) -> Any:
        bound = current()
        own = bound is None
        if bound is None:
            bound = Bound(self._what, max_bytes=self._max_bytes, seconds=_seconds(kwargs.get("timeout"), self._seconds))
        token = _current.set(bound)  # the connection's getresponse watches its socket with it (_watched)
        try:
            kwargs["stream"] = True
            kwargs["timeout"] = bound.left()  # each read at most what is left of the whole
            try:
                response = self._inner.send(request, **kwargs)
            except BaseException as error:
                exceeded = bound.explain(error)  # the deadline shut the socket while the headers were awaited
                if exceeded is not None:
                    raise exceeded from None
                raise
            _read_body(response, bound)
            if bound.expired:  # the socket was shut under the reading: what was read may look whole and is not
                response.close()
                raise bound._refuse(TooSlow)
            return response
        finally:
            _current.reset(token)
            if own:
                bound.release()

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _read_body(response: Any, bound: Bound) -> None:
    """Read the body of a streamed requests/niquests response through the bound, kept as its ``content``."""
    connection = session_internals.connection_of(response)
    sock = getattr(connection, "sock", None)
    watched = isinstance(connection, tuple(_watched_classes.values()))  # already, since the request was sent
    if isinstance(sock, socket.socket) and not watched:
        bound.watch(sock)
    parts: list[bytes] = []
    try:
        length = str(response.headers.get("Content-Length", ""))
        if length.isascii() and length.isdigit():
            bound.announced(int(length))
        for chunk in response.iter_content(CHUNK_BYTES):
            bound.spend(len(chunk))
            parts.append(chunk)
    except BaseException as error:
        parts.clear()  # at once: the exception's traceback keeps this frame, and the bound keeps the exception
        response.close()  # closes the connection: the server's next write fails
        exceeded = bound.explain(error)
        if exceeded is not None:
            raise exceeded from None
        raise
    session_internals.keep_body(response, b"".join(parts))


_watched_classes: dict[type, type] = {}


def _watched(connection_class: type) -> type:
    """The library's connection class, whose ``getresponse`` (called once the request is sent, before the status
    line and headers are read) hands its socket to the current bound: a server that trickles its headers is cut
    at the deadline too, on a new connection or a kept one."""
    if connection_class not in _watched_classes:

        def getresponse(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = current()
            sock = getattr(self, "sock", None)
            if bound is not None and isinstance(sock, socket.socket):
                bound.watch(sock)
            return session_internals.sent_then_read(connection_class, self, *args, **kwargs)

        watched = type(f"Watched{connection_class.__name__}", (connection_class,), {"getresponse": getresponse})
        _watched_classes[connection_class] = watched
    return _watched_classes[connection_class]


def _watch_connections(adapter: Any) -> None:
    """Make every connection pool of a requests/niquests adapter use watched connections (once: a pool already
    watched is left as it is, or each exchange would be watched twice, a descriptor and a deadline more)."""
    pools = session_internals.pool_classes(adapter)
    if pools is None:
        return
    watched = tuple(_watched_classes.values())
    session_internals.use_pool_classes(
        adapter,
        {
            scheme: pool if issubclass(pool.ConnectionCls, watched) else _watched_pool(pool)
            for scheme, pool in pools.items()
        },
    )


_watched_pools: dict[type, type] = {}


def _watched_pool(pool: type) -> type:
    """The library's pool class, its connections watched: made once per class (a class made per session would be
    garbage only the collector's full pass frees, a few kB each)."""
    if pool not in _watched_pools:
        connection_class = pool.ConnectionCls  # type: ignore[attr-defined]
        _watched_pools[pool] = type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": _watched(connection_class)})
    return _watched_pools[pool]


def bound_session[S](session: S, what: str, *, max_bytes: int, seconds: float = 30.0) -> S:
    """The session, every answer's body read through a bound: the one entered with ``with bound:`` around the call,
    else one per request of ``max_bytes`` and the request's ``timeout`` taken as the whole exchange's deadline
    (``seconds`` when it has none). Call after mounting any transport adapter of your own; one adapter mounted under
    several prefixes (http:// and https://) gets one bounded transport."""
    adapters = session.adapters  # type: ignore[attr-defined]
    bounded: dict[int, _BoundedTransport] = {}
    for prefix, adapter in list(adapters.items()):
        if isinstance(adapter, _BoundedTransport):
            continue
        if id(adapter) not in bounded:
            _watch_connections(adapter)
            bounded[id(adapter)] = _BoundedTransport(adapter, what, max_bytes, seconds)
        adapters[prefix] = bounded[id(adapter)]
    return session
