"""Servers on 127.0.0.1 that never finish answering: an HTTP server whose every answer is endless chunks (fast, or a
byte at a time) or endless headers, an IMAP server whose reply never ends, an SMTP server whose greeting never ends.
Each counts what it wrote and notes when the client hung up (its next write failed), and stops by itself after
``seconds``.

``peak_growth`` samples the test process's resident memory while a call runs."""

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CHUNK = b"x" * 65536


@dataclass
class Hostile:
    port: int
    bytes_written: int = 0
    connections: int = 0
    hung_up: threading.Event = field(default_factory=threading.Event)  # a write failed: the client closed
    hung_up_at: float = 0.0  # time.monotonic() of the first failed write

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


def _read_request(conn: socket.socket) -> bytes:
    """An HTTP request's head and its Content-Length body (what a client sends before it reads)."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return data
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        more = conn.recv(65536)
        if not more:
            break
        body += more
    return head


@contextlib.contextmanager
def _serving(take: Callable[[socket.socket, Callable[[bytes], bool]], None], seconds: float) -> Iterator[Hostile]:
    listener = socket.create_server(("127.0.0.1", 0))
    state = Hostile(port=listener.getsockname()[1])
    stop = threading.Event()
    ends_at = time.monotonic() + seconds

    def write(conn: socket.socket, data: bytes) -> bool:
        """Whether the write went through (False: the client hung up, or time is up)."""
        if stop.is_set() or time.monotonic() > ends_at:
            return False
        try:
            conn.sendall(data)
        except OSError:
            if not state.hung_up.is_set():
                state.hung_up_at = time.monotonic()
                state.hung_up.set()
            return False
        state.bytes_written += len(data)
        return True

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(seconds)
            with contextlib.suppress(OSError):
                take(conn, lambda data: write(conn, data))

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set() and time.monotonic() < ends_at:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            state.connections += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        listener.close()
        thread.join(2)


def endless_http(
    *,
    status: str = "200 OK",
    content_type: str = "application/json",
    drip: bool = False,
    drip_headers: bool = False,
    seconds: float = 60,
) -> contextlib.AbstractContextManager[Hostile]:
    """Every request is answered with ``status`` and a chunked body that never ends: 64 KB chunks as fast as the
    client reads them, or (``drip``) one byte every 50 ms; or (``drip_headers``) a header line that never ends,
    one byte every 50 ms."""

    def take(conn: socket.socket, write: Callable[[bytes], bool]) -> None:
        _read_request(conn)
        if drip_headers:
            if not write(f"HTTP/1.1 {status}\r\nX-Slow: ".encode()):
                return
            while True:
                time.sleep(0.05)
                if not write(b"x"):
                    return
        head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
        if not write(head.encode()):
            return
        while True:
            if drip:
                time.sleep(0.05)
                if not write(b"1\r\n \r\n"):
                    return
            elif not write(b"10000\r\n" + CHUNK + b"\r\n"):
                return

    return _serving(take, seconds)


def endless_imap(seconds: float = 60) -> contextlib.AbstractContextManager[Hostile]:
    """Greets, then answers the first command with untagged lines that never end (imaplib keeps each one)."""
    line = b"* OK " + b"x" * 990 + b"\r\n"

    def take(conn: socket.socket, write: Callable[[bytes], bool]) -> None:
        if not write(b"* OK IMAP4rev1 ready\r\n"):
            return
        conn.recv(65536)
        while write(line * 64):
            pass

    return _serving(take, seconds)


def endless_smtp(seconds: float = 60) -> contextlib.AbstractContextManager[Hostile]:
    """A greeting continued ("220-...") without end (smtplib keeps each line until the reply's last)."""
    line = b"220-" + b"x" * 990 + b"\r\n"

    def take(conn: socket.socket, write: Callable[[bytes], bool]) -> None:
        while write(line * 64):
            pass

    return _serving(take, seconds)


def rss() -> int:
    """The process's resident memory, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@dataclass
class Measured:
    result: Any
    error: BaseException | None
    seconds: float
    growth: int  # the highest resident memory seen during the call, less the memory before it
    ended_at: float


def peak_growth(call: Callable[[], Any]) -> Measured:
    """Run ``call`` while a thread samples the process's resident memory every 5 ms."""
    before = rss()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    result, error = None, None
    try:
        result = call()
    except Exception as failure:
        error = failure
    ended = time.monotonic()
    done.set()
    sampler.join()
    peak[0] = max(peak[0], rss())
    return Measured(result, error, ended - started, peak[0] - before, ended)


@dataclass
class Flood:
    before: int  # resident bytes before the calls
    peak: int  # the highest seen while they ran
    idle: int  # 3 s after the last (the clean-up after large answers runs within 2.5 s: ops/bounded.py)
    seconds: float
    refusals: list[str]  # each call's ServiceError, in words


def calendar_answers_in_threads(answers: int, threads: int) -> Flood:
    """``answers`` calls of the real calendar code (connections/calendars.py), ``threads`` at a time, against a
    CalDAV server that streams every answer without end; the process's resident memory around them."""
    from concurrent.futures import ThreadPoolExecutor
    from datetime import UTC, datetime, timedelta

    from connections.calendars import CalendarServer, list_events
    from connections.network import ServiceError

    start = datetime(2026, 1, 5, tzinfo=UTC)
    refusals: list[str] = []
    with endless_http(status="207 Multi-Status", content_type="text/xml", seconds=300) as server:
        calendar = CalendarServer(url=server.url, username="a", password="b", calendar_url=server.url + "cal/")

        def answer(_: int) -> None:
            try:
                list_events(calendar, start, start + timedelta(days=7), seconds=20)
            except ServiceError as error:
                refusals.append(str(error))

        answer(0)  # the first call's imports and caches are not what is measured
        refusals.clear()
        time.sleep(1)
        before = rss()
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.01):
                peak[0] = max(peak[0], rss())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(answer, range(answers)))
        seconds = time.monotonic() - began
        done.set()
        sampler.join()
        time.sleep(3)
        return Flood(before, peak[0], rss(), seconds, refusals)
