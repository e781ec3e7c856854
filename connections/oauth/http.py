"""Every HTTP exchange of an OAuth flow with a server a person named (metadata, registration, token, revocation).

The same rules as the MCP servers' own URLs (connections/addresses.py): the URL's form is checked, every address
its host resolves to must be public unless MCP_ALLOW_PRIVATE_ADDRESSES is on, and the TCP connection is opened to
a checked address (``GuardedBackend``, so DNS rebinding reaches nothing inside). Redirects are not followed. Each
answer is read within OAUTH_TIMEOUT_SECONDS in all (a server that trickles bytes is cut off at the deadline) and
at most OAUTH_MAX_ANSWER_BYTES (counted while reading: 100 MB is never held in memory).

Endpoints that receive secrets or that the person's browser is sent to (authorization, token, registration,
revocation) must be https unless OAUTH_ALLOW_HTTP is on (development and tests).
"""

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from django.conf import settings

from connections.addresses import RefusedUrl, check_resolved, check_url
from connections.client import bounded_http_client
from connections.threads import in_own_thread
from ops.bounded import Busy, TooLarge


class OAuthHttpError(Exception):
    """An exchange with the authorization server failed; the text says what, in a sentence fit for the person. It
    never contains a token, a code or a secret."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: httpx2.Headers
    body: bytes

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object, or None when it is not one."""
        try:
            value = json.loads(self.body)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def http_allowed() -> bool:
    return bool(settings.OAUTH_ALLOW_HTTP)


def check_endpoint(url: object, label: str, *, secure: bool = True) -> str:
    """The URL if we may use it as the named endpoint (its form, its addresses, https when ``secure``);
    OAuthHttpError naming the endpoint otherwise."""
    if not isinstance(url, str) or not url:
        raise OAuthHttpError(f"The authorization server gave no usable {label}.")
    try:
        checked = check_url(url)
        check_resolved(checked)
    except RefusedUrl as refused:
        reason = str(refused).replace("serverUrl", "the URL")
        raise OAuthHttpError(f"The {label} {_shown(url)} is refused: {reason}") from None
    if secure and urlsplit(checked).scheme != "https" and not http_allowed():
        raise OAuthHttpError(f"The {label} {_shown(url)} is not https; sign-in details only travel encrypted.")
    return checked


def _shown(url: str, limit: int = 200) -> str:
    """A URL for an error text: without its query (which may carry anything) and bounded."""
    parts = urlsplit(url)
    text = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exchange(
    method: str,
    url: str,
    label: str,
    *,
    form: str | None = None,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    secure: bool = True,
    seconds: float | None = None,
    max_bytes: int | None = None,
) -> Answer:
    """One request to a checked endpoint and its whole answer, bounded in time and bytes (OAUTH_TIMEOUT_SECONDS and
    OAUTH_MAX_ANSWER_BYTES unless ``seconds`` and ``max_bytes`` say otherwise: an API used with the tokens, such as
    Microsoft Graph, has its own). ``form`` is an encoded application/x-www-form-urlencoded body, ``body`` a JSON
    one."""
    checked = check_endpoint(url, label, secure=secure)
    timeout = float(settings.OAUTH_TIMEOUT_SECONDS) if seconds is None else max(seconds, 0.1)
    limit = int(settings.OAUTH_MAX_ANSWER_BYTES) if max_bytes is None else max_bytes
    http, bound = bounded_http_client(timeout, limit, f"The {label}")
    sent = {"Accept": "application/json", **(headers or {})}
    if form is not None:
        sent["Content-Type"] = "application/x-www-form-urlencoded"

    async def run() -> Answer:
        with anyio.fail_after(timeout):
            async with http:
                response = await http.request(
                    method, checked, content=form.encode() if form is not None else None, json=body, headers=sent
                )
                return Answer(status=response.status_code, headers=response.headers, body=response.content)

    try:
        return in_own_thread(lambda: anyio.run(run), name="oauth-exchange")
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        if isinstance(bound.exceeded, Busy):
            raise OAuthHttpError(str(bound.exceeded)) from None
        too_large = isinstance(bound.exceeded, TooLarge)
        raise OAuthHttpError(_explained(error, label, too_large, bound.max_bytes)) from None
    finally:
        bound.release()  # its bytes back to the process's budget (ops/bounded.py)


def _explained(error: BaseException, label: str, too_large: bool, limit: int) -> str:
    if too_large:
        return f"The {label} answered more than {limit // 1000} kB, the most this server reads."
    leaves = list(error.exceptions) if isinstance(error, BaseExceptionGroup) else [error]
    for leaf in leaves:
        if isinstance(leaf, (TimeoutError, httpx2.TimeoutException)):
            return f"The {label} did not answer in time."
        if isinstance(leaf, httpx2.ConnectError):
            return f"Could not connect to the {label} (refused, unreachable or not a public address)."
    return f"The exchange with the {label} failed ({type(leaves[0]).__name__})."
