"""A small JSON-over-HTTP client for the remote backends (urllib: no dependency). It never follows redirects (a
signed POST must not be replayed elsewhere) and never puts the URL into an error text (it may carry a token).

Its timeout bounds the whole exchange (connect, send, status line, headers, body), not each socket read: a server
that sends one header line a second would otherwise hold an attempt far past ASSISTANT_TIMEOUT_SECONDS."""

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message as HeaderMap

from assistant.outcomes import PermanentFailure, TransientFailure

MAX_RESPONSE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    headers: HeaderMap

    def retry_after(self) -> float | None:
        """Retry-After in seconds, when the server sent it as a number (RFC 9110 also allows a date: ignored)."""
        raw = (self.headers.get("Retry-After") or "").strip()
        return float(raw) if raw.isdigit() else None


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx status, which the caller treats as a refusal


class _Deadline:
    """Shuts a connection's socket down at a fixed time, whatever the server is doing: a blocked read then returns
    at once (the per-read socket timeout only bounds each read). One timer per exchange, cancelled when it ends."""

    def __init__(self, seconds: float) -> None:
        self.ends_at = time.monotonic() + seconds
        self.expired = False
        self._timer: threading.Timer | None = None

    def watch(self, sock: socket.socket) -> None:
        self._timer = threading.Timer(max(self.ends_at - time.monotonic(), 0.0), self._expire, args=(sock,))
        self._timer.daemon = True
        self._timer.start()

    def _expire(self, sock: socket.socket) -> None:
        self.expired = True
        with contextlib.suppress(OSError):  # already closed: the exchange ended on its own
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def opener(self) -> urllib.request.OpenerDirector:
        deadline = self

        class Http(http.client.HTTPConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        class Https(http.client.HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        class HttpHandler(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(Http, req)

        class HttpsHandler(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(Https, req, context=self._context)  # type: ignore[attr-defined]

        return urllib.request.build_opener(_RefuseRedirects, HttpHandler, HttpsHandler)


def post_json(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Response:
    """POST a JSON body; return any HTTP answer, raise TransientFailure when there is none within ``timeout``
    seconds for the whole exchange (PermanentFailure when the request cannot even be built)."""
    deadline = _Deadline(timeout)
    try:
        response = _post(url, body, headers, timeout, deadline.opener())
    except TransientFailure:
        if deadline.expired:
            raise TransientFailure(f"No response within {timeout:g} seconds.") from None
        raise
    finally:
        deadline.cancel()
    if deadline.expired:  # the socket was shut mid-body: what was read is not the whole answer
        raise TransientFailure(f"No response within {timeout:g} seconds.")
    return response


def _post(
    url: str, body: bytes, headers: dict[str, str], timeout: float, opener: urllib.request.OpenerDirector
) -> Response:
    try:
        request = urllib.request.Request(  # noqa: S310  (the URL is operator configuration, checked to be http(s))
            url, data=body, method="POST", headers={"Content-Type": "application/json", **headers}
        )
        with opener.open(request, timeout=timeout) as answer:
            return Response(answer.status, answer.read(MAX_RESPONSE_BYTES), answer.headers)
    except urllib.error.HTTPError as error:
        with error:
            return Response(error.code, error.read(MAX_RESPONSE_BYTES), error.headers)
    except TimeoutError:
        raise TransientFailure(f"No response within {timeout:g} seconds.") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise TransientFailure(f"No response within {timeout:g} seconds.") from None
        raise TransientFailure(f"Could not connect: {error.reason}.") from None
    except (http.client.HTTPException, ConnectionError) as error:
        raise TransientFailure(f"The connection failed: {type(error).__name__}.") from None
    except ValueError:
        # urllib and http.client quote the URL or the header value they refuse, and a header holds the API key.
        raise PermanentFailure(
            "The request could not be built: check the backend's URL and that its API key has no line breaks."
        ) from None


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
