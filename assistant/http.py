"""A small JSON-over-HTTP client for the remote backends (http.client: no dependency), keeping connections open
between requests. It never follows redirects (a signed POST must not be replayed elsewhere) and never puts the URL
into an error text (it may carry a token).

Its timeout bounds the whole exchange (connect, send, status line, headers, body), not each socket read: a server
that sends one header line a second would otherwise hold an attempt far past ASSISTANT_TIMEOUT_SECONDS. The answer's
body is bounded in bytes too (``max_bytes``), however it is framed: both bounds are ops/bounded.py's."""

import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from email.message import Message as HeaderMap
from urllib.parse import urlsplit

from django.conf import settings

from assistant.outcomes import PermanentFailure, TransientFailure
from ops.bounded import Bound, Busy, TooLarge, TooSlow

MAX_RESPONSE_BYTES = 1024 * 1024  # when the caller names no bound of its own


class AnswerLost(TransientFailure):
    """The request was sent (or may have been) but its answer did not come: the server may have acted on it."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    headers: HeaderMap

    def retry_after(self) -> float | None:
        """Retry-After in seconds, when the server sent it as a number (RFC 9110 also allows a date: ignored)."""
        raw = (self.headers.get("Retry-After") or "").strip()
        return float(raw) if raw.isdigit() else None


class _Connections(threading.local):
    """Each thread's keep-alive connections, by (scheme, host, port): a delivery worker's attempt threads together
    form the pool (one connection per thread and runtime), with no checkout and no lock."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str, int], http.client.HTTPConnection] = {}


_connections = _Connections()
_TLS = ssl.create_default_context()
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def post_to_runtime(url: str, body: bytes, headers: dict[str, str]) -> Response:
    """A request to the assistant runtime (a webhook, or an OpenAI-compatible API), within its time and size bounds."""
    return post_json(
        url,
        body,
        headers,
        settings.ASSISTANT_TIMEOUT_SECONDS,
        max_bytes=settings.ASSISTANT_MAX_ANSWER_BYTES,
        server="The assistant runtime",
    )


def post_json(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    *,
    max_bytes: int = MAX_RESPONSE_BYTES,
    server: str = "The server",
) -> Response:
    """POST a JSON body; return any HTTP answer, raise TransientFailure when there is none within ``timeout``
    seconds for the whole exchange (PermanentFailure when the request cannot even be built, or the answer's body
    is larger than ``max_bytes``: ``server`` names the server in that refusal).

    The connection is kept open for the thread's next request to the same server (HTTP/1.1 keep-alive). A kept
    connection that the server had closed meanwhile fails before any answer arrives; the request is then sent once
    more on a new connection (the same request, the same webhook-id: a runtime that did get the first one drops
    the second)."""
    bound = Bound(server, max_bytes=max_bytes, seconds=timeout)
    target, path = _target(url)
    sent_headers = {"Content-Type": "application/json", **headers}
    for _ in range(2):
        kept = _connections.open.pop(target, None)
        if kept is not None and kept.sock is None:
            kept = None
        try:
            return _exchange(kept or _connect(target, bound.ends_at), kept is not None, path, body, sent_headers, bound)
        except _StaleConnection:
            continue
        except TimeoutError:
            raise AnswerLost(f"No response within {timeout:g} seconds.") from None
        except Busy as error:  # sent, its answer cut because this process was full: as a lost answer, retried
            raise AnswerLost(str(error)) from None
        except TooLarge as error:
            raise PermanentFailure(str(error)) from None
        finally:
            bound.release()
    raise AnswerLost("The connection failed: RemoteDisconnected.")


def _target(url: str) -> tuple[tuple[str, str, int], str]:
    """(scheme, host, port) and the path of an http(s) URL; PermanentFailure for anything else."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    if parts.scheme not in ("http", "https") or not parts.hostname or not port:
        raise PermanentFailure("The request could not be built: check the backend's URL.")
    return (parts.scheme, parts.hostname, port), (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _StaleConnection(Exception):
    """A kept connection the server had closed: nothing was answered, try a new one."""


def _connect(target: tuple[str, str, int], ends_at: float) -> http.client.HTTPConnection:
    scheme, host, port = target
    remaining = max(ends_at - time.monotonic(), 0.001)
    connection = (
        http.client.HTTPSConnection(host, port, timeout=remaining, context=_TLS)
        if scheme == "https"
        else http.client.HTTPConnection(host, port, timeout=remaining)
    )
    try:
        connection.connect()
    except TimeoutError:
        raise
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise TransientFailure(f"Could not connect: {reason}.") from None
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def _exchange(
    connection: http.client.HTTPConnection,
    kept: bool,
    path: str,
    body: bytes,
    headers: dict[str, str],
    bound: Bound,
) -> Response:
    timeout = bound.ends_at - time.monotonic()
    if timeout <= 0:
        connection.close()
        raise TimeoutError
    connection.sock.settimeout(timeout)
    bound.watch(connection.sock)
    reusable = False
    try:
        connection.request("POST", path, body, headers)
        answer = connection.getresponse()
        data = _body(answer, bound)
        reusable = not answer.will_close and answer.isclosed()  # read to its end, and the server keeps it open
        response = Response(answer.status, data, answer.msg)
    except TooLarge:
        raise
    except TooSlow:
        raise TimeoutError from None
    except _STALE as error:
        if bound.expired:
            raise TimeoutError from None
        if kept:
            raise _StaleConnection from None
        raise AnswerLost(f"The connection failed: {type(error).__name__}.") from None
    except ValueError:
        # http.client quotes the header value or path it refuses, and a header holds the API key.
        raise PermanentFailure(
            "The request could not be built: check the backend's URL and that its API key has no line breaks."
        ) from None
    except (http.client.HTTPException, OSError) as error:
        if bound.expired or isinstance(error, TimeoutError):
            raise TimeoutError from None
        raise AnswerLost(f"The connection failed: {type(error).__name__}.") from None
    finally:
        if not reusable:
            connection.close()
    if bound.expired:  # the socket was (or is being) shut mid-body: what was read may not be the whole answer
        connection.close()
        raise TimeoutError
    if reusable:
        scheme = "https" if isinstance(connection, http.client.HTTPSConnection) else "http"
        _connections.open[(scheme, connection.host, connection.port)] = connection
    return response


def _body(answer: http.client.HTTPResponse, bound: Bound) -> bytes:
    """The answer's body, chunk by chunk through the bound (a Content-Length past it is refused unread)."""
    length = answer.length
    if length is not None:
        bound.announced(length)
    parts = []
    while chunk := answer.read(min(64 * 1024, bound.max_bytes - bound.read + 1)):
        bound.spend(len(chunk))
        parts.append(chunk)
    return b"".join(parts)


def printable(text: str, limit: int = 200) -> str:
    """A remote server's text, for staff: control characters as spaces (a NUL cannot be stored in PostgreSQL, and
    escape codes do not belong in the admin), white space folded, short."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())[:limit]


# Statuses that say "not now" rather than "never": worth another attempt after a while.
_RETRYABLE = {408, 425, 429}


def raise_for_status(response: Response, service: str, detail: str = "") -> None:
    """Turn a non-2xx answer into the failure it means: 5xx and 408/425/429 transient, anything else permanent."""
    if 200 <= response.status < 300:
        return
    text = f"{service} answered HTTP {response.status}" + (f": {detail}" if detail else ".")
    if response.status >= 500 or response.status in _RETRYABLE:
        raise TransientFailure(text, retry_after=response.retry_after())
    raise PermanentFailure(text)
