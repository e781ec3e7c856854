"""Slow clients cannot hold the web server's threads (gunicorn.conf.py uses ``ReadDeadlineWorker``).

gunicorn's gthread worker gives a connection to a thread as soon as its first bytes arrive, and the thread reads the
rest of the request with blocking reads that never time out. A client that sends half a request and waits keeps
that thread; a few dozen such connections (a "slowloris") hold every thread of every worker, and the service stops
answering, /healthz included.

``ReadDeadlineWorker`` does what a buffering proxy does: the worker's event loop (which already waits for
connections in a poller) reads each request with non-blocking reads until its headers and its ``Content-Length``
body are in, and only then gives it to a thread, which parses it from memory. A request not complete within
``read_timeout`` seconds (``REQUEST_READ_TIMEOUT``) of its first byte is answered ``408 request_timeout`` and closed,
without ever having had a thread. Requests whose body is not read up front (``Expect: 100-continue``, a transfer
coding, a body over 1 MiB, headers over 64 KiB) go to a thread once their headers are in; there every read shares the
same deadline (a client dripping a byte at a time does not reset it), and a write waits at most as long.
"""

import contextlib
import re
import selectors
import socket
import time
from functools import partial
from typing import Any

from gunicorn import util as gunicorn_util
from gunicorn.workers.gthread import ThreadWorker

_END_OF_HEADERS = b"\r\n\r\n"
_MAX_GATHERED_HEADERS = 64 * 1024
_MAX_GATHERED_BODY = 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*(\d{1,12})[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
_READ_BODY_LATER = re.compile(rb"^(transfer-encoding|expect)[ \t]*:", re.IGNORECASE | re.MULTILINE)


def gathered_enough(data: bytes) -> bool:
    """Whether ``data`` holds a whole request (headers and Content-Length body), or as much of it as is read up
    front (see the module)."""
    end = data.find(_END_OF_HEADERS)
    if end < 0:
        return len(data) > _MAX_GATHERED_HEADERS
    head = data[:end]
    if _READ_BODY_LATER.search(head):
        return True
    lengths = _CONTENT_LENGTH.findall(head)
    if len(lengths) != 1:
        return True  # none (no body), or several: gunicorn decides what the request is
    length = int(lengths[0])
    return length > _MAX_GATHERED_BODY or len(data) - end - len(_END_OF_HEADERS) >= length


class RequestReadTimeout(Exception):
    """The request's headers or body did not arrive in time. Not an OSError on purpose: gunicorn answers a
    parsing error (an exception) with a response, where it only logs and drops a socket error; and Django turns
    an OSError while reading a body into UnreadablePostError, which would hide why."""


class DeadlineSocket(socket.socket):
    """A client connection whose reads share one deadline per request and whose blocking operations time out."""

    io_timeout: float = 10.0
    read_deadline: float | None = None
    responding = False  # once the response has started, a late read is only gunicorn draining the body
    gathered = b""  # read by the worker's event loop, not yet by the request's parser

    @classmethod
    def adopt(cls, sock: socket.socket, io_timeout: float) -> "DeadlineSocket":
        blocking = sock.getblocking()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.io_timeout = io_timeout
        adopted.setblocking(blocking)
        return adopted

    def start_request(self, seconds: float) -> None:
        self.read_deadline = time.monotonic() + seconds
        self.responding = False

    def setblocking(self, flag: bool) -> None:
        # gthread makes the socket blocking before it reads a request: blocking, but never for ever.
        if flag:
            super().settimeout(self.io_timeout)
        else:
            super().setblocking(False)

    def gather(self) -> bool | None:
        """One non-blocking read into ``gathered``: True when enough is in, None when the client closed."""
        try:
            data = super().recv(65536)
        except (BlockingIOError, InterruptedError):
            return False
        if not data:
            return None
        self.gathered += data
        return gathered_enough(self.gathered)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if self.gathered:
            data, self.gathered = self.gathered[:bufsize], self.gathered[bufsize:]
            return data
        self._bound_read()
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            raise self._late() from None

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        if self.gathered:
            data = self.recv(nbytes or len(buffer))
            buffer[: len(data)] = data
            return len(data)
        self._bound_read()
        try:
            return super().recv_into(buffer, nbytes, flags)
        except TimeoutError:
            raise self._late() from None

    def send(self, data: Any, flags: int = 0) -> int:
        self._bound_write()
        return super().send(data, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._bound_write()
        super().sendall(data, flags)

    def _bound_read(self) -> None:
        timeout = self.gettimeout()
        if timeout == 0.0 or self.read_deadline is None:
            return  # non-blocking (the poller's), or no request under way
        remaining = self.read_deadline - time.monotonic()
        if remaining <= 0:
            raise self._late()
        super().settimeout(remaining if timeout is None else min(timeout, remaining))

    def _bound_write(self) -> None:
        self.responding = True
        if self.gettimeout() != 0.0:
            super().settimeout(self.io_timeout)

    def _late(self) -> Exception:
        # While draining after the response, a plain timeout: gunicorn then closes the connection quietly.
        return TimeoutError("the request was not received in time") if self.responding else RequestReadTimeout()


class ReadDeadlineWorker(ThreadWorker):
    """gunicorn's gthread worker that reads a request whole before a thread takes it (see the module)."""

    read_timeout: float = 10.0  # set by gunicorn.conf.py from REQUEST_READ_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gathering: dict[Any, float] = {}  # connection -> when its request must be in

    def enqueue_req(self, conn: Any) -> None:
        if not isinstance(conn.sock, DeadlineSocket):
            conn.sock = DeadlineSocket.adopt(conn.sock, self.read_timeout)
        parser = conn.parser
        if parser is not None and parser.unreader.buf.getvalue():
            super().enqueue_req(conn)  # the next request is already read (pipelined behind the last one)
            return
        conn.sock.setblocking(False)
        # Most often the whole request is there already (a kept-alive connection the poller found readable): then
        # it goes to a thread at once, without another turn of the poller.
        if not self._gathered(conn, registered=False):
            self.gathering[conn] = time.monotonic() + self.read_timeout
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, _sock: Any) -> None:
        self._gathered(conn, registered=True)

    def _gathered(self, conn: Any, *, registered: bool) -> bool:
        """Read what has arrived; hand the request to a thread once it is in (or close a closed connection).
        Returns whether the connection is done with gathering."""
        try:
            enough = conn.sock.gather()
        except OSError:
            enough = None
        if enough is False:
            return False
        if registered:
            self._stop_gathering(conn)  # before the socket is closed or a thread takes it
        if enough is None:  # the client closed the connection
            self.nr_conns -= 1
            conn.close()
            return True
        conn.data_ready = True  # the thread must not wait for the socket to be readable: it is all read
        super().enqueue_req(conn)
        return True

    def _stop_gathering(self, conn: Any) -> None:
        del self.gathering[conn]
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.poller.unregister(conn.sock)

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        for conn in [conn for conn, deadline in self.gathering.items() if deadline <= now]:
            self._stop_gathering(conn)
            if conn.sock.gathered:  # a request was started: say why it is refused
                _log_late(self.log, self.read_timeout, _ip(conn))
                with contextlib.suppress(OSError):
                    gunicorn_util.write_error(conn.sock, 408, "Request Timeout", "")
            self.nr_conns -= 1
            conn.close()

    def handle(self, conn: Any) -> Any:
        conn.sock.start_request(self.read_timeout)
        return super().handle(conn)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if isinstance(exc, RequestReadTimeout):
            _log_late(self.log, self.read_timeout, addr[0] if addr else "")
            with contextlib.suppress(OSError):  # the client may be gone
                gunicorn_util.write_error(client, 408, "Request Timeout", "")
            return
        super().handle_error(req, client, addr, exc)


def _ip(conn: Any) -> str:
    client = conn.client
    return str(client[0]) if isinstance(client, tuple) and client else ""


def _log_late(log: Any, seconds: float, ip: str) -> None:
    log.warning("Request not received within %ss from ip=%s; answered 408 and closed", seconds, ip)
