"""Every error this service answers in JSON has one body, ``{"success": false, "message": "...", "code": "..."}``
(docs/design.md#errors), built here by ``error_body`` (or ``json_error`` for a plain Django response), and one
code from ``ERROR_CODES``: the list of codes, each with its HTTP status and when it is answered.

That list is the one place a code is declared. The API's exception classes (ingestion/exceptions.py) take their
status from it, the OpenAPI document (ingestion/openapi.py) describes its error responses and the ``code`` enum
from it, and the documentation's error codes page (docs/reference/errors.md) is generated from it when the site is
built; tests/test_error_codes.py fails when any of them disagrees.

Adding a code: add an ``ErrorCode`` below (``in_openapi=True`` when the public /api/v1/inbound endpoints can answer
it), and raise it through an exception class in ingestion/exceptions.py or answer it with ``json_error``; the
documentation picks it up by itself.
"""

from dataclasses import dataclass
from typing import Any

from django.http import JsonResponse


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    when: str  # one line, for the documentation's table and the OpenAPI document
    in_openapi: bool = False  # the public endpoints (the OpenAPI document) can answer it


_LIST = (
    # 301
    ErrorCode(
        "https_required",
        301,
        "plain HTTP to the API with production settings: redirected to the same URL over HTTPS (`Location`); send "
        "it there, your key included, only over HTTPS",
    ),
    # 400
    ErrorCode(
        "invalid_json", 400, "the body is empty or not JSON (the message says where), or names a member twice", True
    ),
    ErrorCode(
        "invalid_idempotency_key", 400, "`Idempotency-Key` empty, over 255 characters or not printable ASCII", True
    ),
    ErrorCode(
        "invalid_body",
        400,
        "not an object; `message` present but not a non-blank string (required on the legacy endpoint); an empty "
        "object; NUL characters, lone surrogates, non-finite numbers or nesting deeper than 64",
        True,
    ),
    ErrorCode(
        "invalid_parameter",
        400,
        "a query parameter out of range: `limit` not 1 to 100 or a `cursor` the list did not give (the list of "
        "messages), `wait` not 0 to 30 seconds (a receipt)",
        True,
    ),
    ErrorCode(
        "bad_request",
        400,
        "refused before reaching the API, most often a `Host` header this server does not serve (`ALLOWED_HOSTS`), "
        "or not valid HTTP/1.1 (gunicorn)",
    ),
    ErrorCode(
        "tunnels_not_supported",
        400,
        "`poke tunnel`'s calls: this server offers no tunnels (see [MCP connections](#mcp-connections))",
    ),
    # 401
    ErrorCode("missing_authorization", 401, "no `Authorization` header", True),
    ErrorCode("malformed_authorization", 401, "the header is not `Bearer <key>`", True),
    ErrorCode("invalid_api_key", 401, "an unknown or mistyped key", True),
    ErrorCode("revoked_api_key", 401, "a revoked key", True),
    ErrorCode(
        "expired_api_key",
        401,
        "a key past the expiry its owner set, or an old secret of a rolled key after its overlap "
        "(see [Key life cycle](#key-life-cycle))",
        True,
    ),
    ErrorCode("wrong_key_generation", 401, "a V1 key on the current endpoint or a V2 key on the legacy one", True),
    ErrorCode(
        "account_disabled",
        401,
        "the key's account was deactivated by staff (`is_active` off in the admin): every key of it, from the next "
        "request",
        True,
    ),
    ErrorCode(
        "invalid_signature",
        401,
        "the assistant callback: a missing or wrong Standard Webhooks signature "
        "(see [The callback endpoint](#the-callback-endpoint)); a webhook trigger: a wrong `X-Hub-Signature-256`",
        True,
    ),
    ErrorCode(
        "invalid_webhook_token",
        401,
        "a webhook trigger's URL without its token (an API key is not one), or with another trigger's "
        "(see [Webhook triggers](#webhook-triggers))",
    ),
    ErrorCode("revoked_webhook_trigger", 401, "a revoked webhook trigger"),
    ErrorCode(
        "timestamp_out_of_tolerance",
        401,
        "the assistant callback only: a `webhook-timestamp` too far from our clock",
        True,
    ),
    ErrorCode(
        "invalid_follow_up_token",
        401,
        "a tool's follow-up with a token that is unknown, already used or expired, or whose connection, sending "
        "key or account is gone (see [Follow-ups](#follow-ups))",
    ),
    ErrorCode("unauthorized", 401, "the metrics path without its bearer token (`METRICS_TOKEN`)"),
    # 403
    ErrorCode(
        "device_code_used",
        400,
        "`poke login`'s poll after the token was handed out (see [CLI log-in](#cli-log-in-poke-login))",
    ),
    ErrorCode(
        "slow_down",
        400,
        "`poke login`'s poll sooner than `CLI_AUTH_POLL_MIN_SECONDS` after the last one for the same device code "
        "(RFC 8628 `slow_down`; the CLI polls on)",
    ),
    ErrorCode("access_denied", 400, "`poke login`'s poll: the log-in was denied on `/device`"),
    ErrorCode("expired_token", 400, "`poke login`'s poll: 10 minutes passed before the token was collected"),
    ErrorCode("invalid_device_code", 404, "`poke login`'s poll with a device code that matches no log-in request"),
    ErrorCode(
        "insufficient_scope",
        403,
        "the key lacks the scope this call needs; the message names it (see [Scopes](#scopes))",
        True,
    ),
    ErrorCode(
        "invalid_channel_signature",
        403,
        "a channel provider's callback under `/channels/` without its provider's valid signature or secret "
        "(`X-Twilio-Signature`, `X-Hub-Signature-256`, Telegram's secret token, BlueBubbles' URL secret); nothing "
        "is recorded",
    ),
    ErrorCode(
        "channel_not_offered",
        404,
        "a callback under `/channels/` for a provider this server is not configured for",
    ),
    ErrorCode("forbidden", 403, "the metrics path from an address outside `METRICS_ALLOWED_IPS`; refused by gunicorn"),
    # 404 - 415
    ErrorCode(
        "not_found",
        404,
        "unknown path under `/api/`; a receipt id that is unknown, malformed or sent with another key; a webhook "
        "trigger's log asked for with a key of another account",
        True,
    ),
    ErrorCode(
        "method_not_allowed", 405, "anything but POST (and OPTIONS); on the receipts endpoint anything but GET", True
    ),
    ErrorCode(
        "not_acceptable", 406, "`/api/schema/` and `/api/docs/` only, for an `Accept` that allows none of their formats"
    ),
    ErrorCode(
        "connection_exists",
        409,
        "connecting a calendar or a mailbox when the account already has one: remove it first",
    ),
    ErrorCode(
        "idempotency_in_progress", 409, "a request with the same `Idempotency-Key` is still being processed", True
    ),
    ErrorCode(
        "trigger_limit_reached",
        409,
        "making a webhook trigger: the account already holds `MAX_ACTIVE_TRIGGERS_PER_ACCOUNT` active triggers",
    ),
    ErrorCode(
        "key_limit_reached",
        409,
        "`poke login` only: the account already holds `MAX_ACTIVE_KEYS_PER_ACCOUNT` active keys, so no key was issued",
    ),
    ErrorCode(
        "reply_already_recorded", 409, "the assistant callback only: the message already has a different reply", True
    ),
    ErrorCode(
        "request_timeout",
        408,
        "the request's headers and body did not arrive within `REQUEST_READ_TIMEOUT` seconds (a stalled or very slow "
        "client); the connection is closed",
    ),
    ErrorCode("length_required", 411, "a chunked body without `Content-Length`", True),
    ErrorCode(
        "payload_too_large",
        413,
        "body over `INGEST_MAX_BODY_BYTES` (a provider's callback under `/channels/`: `CHANNEL_MAX_BODY_BYTES`)",
        True,
    ),
    ErrorCode("uri_too_long", 414, "refused by gunicorn before the API: a request line over 4094 bytes"),
    ErrorCode(
        "unsupported_media_type",
        415,
        "Content-Type is not JSON, or declares a charset other than UTF-8 (a provider's callback under `/channels/`: "
        "not the type that provider sends)",
        True,
    ),
    ErrorCode("expectation_failed", 417, "refused by gunicorn: an `Expect` other than `100-continue`"),
    # 422 - 503
    ErrorCode("idempotency_key_reused", 422, "the same `Idempotency-Key` was used with a different body", True),
    ErrorCode(
        "mcp_server_unusable",
        422,
        "an MCP server could not be used (unreachable, no answer in time, not MCP); the message says what failed",
    ),
    ErrorCode("mcp_authentication_required", 422, "an MCP server answered 401 or 403: add it with its API key"),
    ErrorCode(
        "mcp_oauth_required",
        422,
        'an MCP server signs in with OAuth: add it from the console (the body also carries `"error": '
        '"OAUTH_REQUIRED"`, which the poke CLI reads)',
    ),
    ErrorCode(
        "mail_calendar_unusable",
        422,
        "a calendar or mail server could not be used (unreachable, no answer in time, no TLS, a private address, "
        "not CalDAV/IMAP/SMTP); the message says what failed",
    ),
    ErrorCode(
        "mail_calendar_login_refused",
        422,
        "a calendar or mail server refused the username or password (many providers want an app password)",
    ),
    ErrorCode(
        "rate_limited",
        429,
        "over the key's rate limit, or too many failed authentications from the address "
        "(see [Rate limits](#rate-limits))",
        True,
    ),
    ErrorCode(
        "too_many_connection_checks",
        429,
        "adding or syncing a connection while another check of the same account's connections is still running "
        "(`MCP_CHECKS_PER_ACCOUNT`; `Retry-After`)",
    ),
    ErrorCode("headers_too_large", 431, "refused by gunicorn: more than 100 headers or one over 8190 bytes"),
    ErrorCode(
        "internal_error", 500, "a bug on our side; the log has its traceback under the response's `X-Request-ID`"
    ),
    ErrorCode("not_implemented", 501, "refused by gunicorn: a transfer coding other than chunked"),
    ErrorCode(
        "connection_checks_busy",
        503,
        "adding or syncing a connection while this web process already runs `MCP_CHECKS_PER_PROCESS` checks of "
        "servers (`Retry-After`)",
    ),
    ErrorCode(
        "receipt_waits_busy",
        503,
        "a receipt asked to wait (`?wait=`) while this web process already has `RECEIPT_WAIT_SLOTS` receipts waiting "
        "(`Retry-After`): ask again then, or without `wait`",
        True,
    ),
    ErrorCode(
        "service_unavailable",
        503,
        "the database or cache cannot be reached; nothing was recorded (`Retry-After: 5`)",
        True,
    ),
)

ERROR_CODES: dict[str, ErrorCode] = {entry.code: entry for entry in _LIST}


class UnknownErrorCode(LookupError):
    pass


def status_of(code: str) -> int:
    """The HTTP status of a listed code; an unlisted one fails loudly (at import, for an exception class)."""
    try:
        return ERROR_CODES[code].status
    except KeyError:
        raise UnknownErrorCode(
            f"error code {code!r} is not in ERROR_CODES (ops/errors.py): add ErrorCode({code!r}, <status>, "
            "'<when it is answered>') there (the documentation's table is generated from that list)"
        ) from None


def error_body(code: str, message: str) -> dict[str, Any]:
    """The one error body: ``{"success": false, "message": message, "code": code}``."""
    return {"success": False, "message": message, "code": code}


def json_error(code: str, message: str, headers: dict[str, str] | None = None) -> JsonResponse:
    """A plain Django JSON error response, its status the code's own (DRF views raise exception classes instead)."""
    return JsonResponse(error_body(code, message), status=status_of(code), headers=headers)


# --- The documentation's table ------------------------------------------------------------------------------------
def markdown_table() -> str:
    """Every code as a Markdown table, by status (in the list's order within one): docs/reference/errors.md is built
    from it."""
    rows = ["| status | code | when |", "|---|---|---|"]
    rows += [f"| {e.status} | `{e.code}` | {e.when} |" for e in sorted(_LIST, key=lambda e: e.status)]
    return "\n".join(rows)
