"""ASSISTANT_TIMEOUT_SECONDS bounds a whole exchange with the runtime, not each socket read: a runtime that keeps
the connection alive by sending its answer a line at a time still ends the attempt at the deadline."""

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from assistant.http import post_json
from assistant.outcomes import TransientFailure

LINES = 50  # bounded: the dripping server gives up after this many lines


class Drip:
    """A raw HTTP server on 127.0.0.1 that answers one connection with a status line and then one header line per
    `every` seconds (each gap well under the client's timeout), and records whether it got to the end."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.sent_everything = False
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"

    def serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            read_request(connection)
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                for n in range(LINES):
                    if self.stop.wait(self.every):
                        return
                    connection.sendall(b"X-Drip-%d: yes\r\n" % n)
                connection.sendall(b"Content-Length: 2\r\n\r\n{}")
                self.sent_everything = True
            except OSError:
                return  # the client hung up: what the test expects


def read_request(connection: socket.socket) -> None:
    """Read the whole request (headers, then Content-Length bytes): closing with unread bytes would reset the
    connection instead of ending it."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := connection.recv(65536)):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length and (chunk := connection.recv(65536)):
        body += chunk


@contextmanager
def dripping_server(every: float) -> Iterator[Drip]:
    drip = Drip(every)
    thread = threading.Thread(target=drip.serve, daemon=True)
    thread.start()
    try:
        yield drip
    finally:
        drip.stop.set()
        thread.join(timeout=10)
        drip.listener.close()


def test_a_runtime_sending_its_answer_a_line_at_a_time_is_cut_off_at_the_deadline():
    with dripping_server(every=0.2) as drip:  # 50 lines: 10 s in all, against a 1 s deadline
        with pytest.raises(TransientFailure, match="No response within 1 seconds"):
            post_json(drip.url, b"{}", {}, timeout=1)
        assert not drip.sent_everything


def test_an_answer_within_the_deadline_is_returned_whole():
    with dripping_server(every=0.0) as drip:
        response = post_json(drip.url, b"{}", {}, timeout=5)
    assert (response.status, response.body, response.headers["X-Drip-49"]) == (200, b"{}", "yes")
