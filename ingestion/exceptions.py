"""One exception class per kind of API error, each with its stable code, all rendered by one handler as
``{"success": false, "message": "...", "code": "..."}`` (docs/design.md#errors, built by ops.errors).

A class names its code; its status comes from the code's entry in ops/errors.py ``ERROR_CODES`` (a class whose code
is not listed there fails at import, saying what to add)."""

import logging
from typing import Any

from django.db import DatabaseError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from ops.errors import error_body, status_of
from ops.outage import RETRY_AFTER_SECONDS, is_outage

logger = logging.getLogger(__name__)


class ApiError(exceptions.APIException):
    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_body"
    default_detail = "The request could not be processed."

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.status_code = status_of(cls.default_code)

    def __init__(self, message: str | None = None) -> None:
        super().__init__(detail=message or self.default_detail, code=self.default_code)


# --- 401: the caller is not who they need to be -------------------------------------------------------------
class Unauthorized(ApiError):
    default_code = "invalid_api_key"


class MissingAuthorization(Unauthorized):
    default_code = "missing_authorization"
    default_detail = "Missing Authorization header. Send 'Authorization: Bearer <API_KEY>'."


class MalformedAuthorization(Unauthorized):
    default_code = "malformed_authorization"
    default_detail = (
        "Malformed Authorization header. Use 'Bearer', one space, then the API key, "
        "with no other spaces or line breaks."
    )


class InvalidApiKey(Unauthorized):
    default_code = "invalid_api_key"
    default_detail = (
        "Invalid API key. Check that it was copied whole, or create a new key in the console under API Keys."
    )


class RevokedApiKey(Unauthorized):
    default_code = "revoked_api_key"
    default_detail = "This API key has been revoked. Create a new key in the console under API Keys."


class ExpiredApiKey(Unauthorized):
    default_code = "expired_api_key"
    default_detail = (
        "This API key has expired. Create a new key in the console under API Keys, or roll this one on its page."
    )


class AccountDisabled(Unauthorized):
    """The key's account was deactivated (is_active off, by staff): none of its keys works until it is reactivated."""

    default_code = "account_disabled"
    default_detail = "The account this API key belongs to is deactivated. Contact support to have it reactivated."


class WrongKeyGeneration(Unauthorized):
    default_code = "wrong_key_generation"


class InvalidSignature(Unauthorized):
    """An assistant-runtime callback without a valid Standard Webhooks signature."""

    default_code = "invalid_signature"
    default_detail = "The webhook-signature does not match; sign the request with the shared whsec_ secret."


class TimestampOutOfTolerance(Unauthorized):
    """A signed callback whose webhook-timestamp is too far from our clock: a replay, or a wrong clock."""

    default_code = "timestamp_out_of_tolerance"


# --- 403: the key is valid but may not do this ------------------------------------------------------------------
class InsufficientScope(ApiError):
    """The key lacks the scope the call needs (keys/scopes.py); ``scope`` is named in the message and, as RFC 6750
    §3.1 has it, in ``WWW-Authenticate``."""

    default_code = "insufficient_scope"

    def __init__(self, scope: str, action: str) -> None:
        super().__init__(
            f"This key may not {action}: it lacks the scope {scope}. Give it that scope on its page under API Keys, "
            "or use a key that has it."
        )
        self.scope = scope


# --- 4xx: the request itself is wrong -------------------------------------------------------------------------
class InvalidJson(ApiError):
    default_code = "invalid_json"
    default_detail = "The body is not valid JSON."


class InvalidParameter(ApiError):
    default_code = "invalid_parameter"


class InvalidBody(ApiError):
    default_code = "invalid_body"


class PayloadTooLarge(ApiError):
    default_code = "payload_too_large"


class UnsupportedMediaType(ApiError):
    default_code = "unsupported_media_type"


class NotFound(ApiError):
    default_code = "not_found"
    # Every endpoint is in the OpenAPI document (tests/test_openapi.py keeps it whole): point there, not at a list
    # written here that falls behind the API.
    default_detail = (
        "Not found: there is no such endpoint. Every endpoint is described at /api/docs/ (the OpenAPI document is "
        "/api/schema/); to send a message, POST /api/v1/inbound/api-message."
    )


class LengthRequired(ApiError):
    default_code = "length_required"
    default_detail = (
        "The body was sent without a Content-Length (chunked transfer encoding is not supported). "
        "Send the JSON body with a Content-Length header."
    )


# --- Idempotency-Key (docs/design.md#idempotency) ------------------------------------------------------------------
class InvalidIdempotencyKey(ApiError):
    default_code = "invalid_idempotency_key"
    default_detail = "The Idempotency-Key header must be 1 to 255 printable ASCII characters, for example a UUID."


class IdempotencyInProgress(ApiError):
    default_code = "idempotency_in_progress"
    default_detail = (
        "A request with this Idempotency-Key is still being processed. Retry in a moment to get its response."
    )
    wait = 1  # seconds, sent as Retry-After: the first request is usually done by then


class IdempotencyKeyReused(ApiError):
    default_code = "idempotency_key_reused"
    default_detail = "This Idempotency-Key was already used with a different body. Use a new key for a new message."


# --- 429: too many requests ----------------------------------------------------------------------------------
class RateLimited(ApiError):
    """Over a rate limit; ``wait`` (seconds) becomes the Retry-After header."""

    default_code = "rate_limited"

    def __init__(self, message: str, wait: int) -> None:
        super().__init__(message)
        self.wait = wait


class MessageNotFound(NotFound):
    default_detail = (
        "No message with this id was sent with this key. Use the id from the response that accepted the message, "
        "with the key that sent it."
    )


class ReplyAlreadyRecorded(ApiError):
    default_code = "reply_already_recorded"
    default_detail = "This message already has its reply in the thread; a message takes one reply."


class ReceiptWaitsBusy(ApiError):
    default_code = "receipt_waits_busy"
    default_detail = (
        "This server has as many receipts waiting as it lets wait at once. Ask again in a few seconds (Retry-After), "
        "or without wait."
    )
    wait = 5  # sent as Retry-After


class ServiceUnavailable(ApiError):
    default_code = "service_unavailable"
    default_detail = "The service is briefly unavailable and nothing was recorded. Retry in a few seconds."
    wait = RETRY_AFTER_SECONDS  # sent as Retry-After


def _what_to_send(view: Any) -> str:
    """The fix for a 405, from the methods the view takes (the receipts endpoint reads; the others take a POST)."""
    methods = [method for method in getattr(view, "allowed_methods", ["POST"]) if method not in ("HEAD", "OPTIONS")]
    if "POST" in methods:
        return "Send a POST with a JSON body."
    return f"Send a {' or '.join(methods)}."


def _media_types(view: Any) -> str:
    return " or ".join(renderer.media_type for renderer in getattr(view, "renderer_classes", []))


def _from_drf(exc: exceptions.APIException, view: Any) -> tuple[str, str]:
    """Our code and message for the exceptions DRF raises itself."""
    if isinstance(exc, exceptions.MethodNotAllowed):
        return "method_not_allowed", f"{exc.detail} {_what_to_send(view)}"
    if isinstance(exc, exceptions.UnsupportedMediaType):
        default = "Send the body as JSON with the header 'Content-Type: application/json'."
        return "unsupported_media_type", f"{exc.detail} {getattr(view, 'media_type_hint', default)}"
    if isinstance(exc, exceptions.NotAcceptable):  # only the schema and docs views negotiate (YAML, JSON, HTML)
        return "not_acceptable", f"{exc.detail} Send no Accept header, or one that allows {_media_types(view)}."
    if isinstance(exc, exceptions.ParseError):
        return "invalid_json", str(exc.detail)
    if isinstance(exc, exceptions.Throttled):
        return "rate_limited", str(exc.detail)
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return "invalid_api_key", InvalidApiKey.default_detail
    if isinstance(exc, exceptions.NotFound):
        return "not_found", NotFound.default_detail
    if isinstance(exc, exceptions.PermissionDenied):
        return "forbidden", str(exc.detail)
    if isinstance(exc, exceptions.ValidationError):
        return "invalid_body", f"The body is not valid: {exc.detail}"
    return "internal_error", str(exc.detail)  # not reached: every exception DRF raises is named above


def error_response(status_code: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = error_body(code, message)
    retry_after = (headers or {}).get("Retry-After")
    if status_code == status.HTTP_429_TOO_MANY_REQUESTS and retry_after is not None:
        # The wait in the body too, in milliseconds: the official poke.mcp helper reads retryAfterMs, not the header.
        body["retryAfterMs"] = int(retry_after) * 1000
    response = Response(body, status=status_code, headers=headers)
    if status_code == status.HTTP_401_UNAUTHORIZED:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Http404):
        exc = NotFound()
    if is_outage(exc):
        # The database or cache is unreachable; the transaction rolled back, so nothing was half-written.
        logger.warning("backing store unavailable: %s", type(exc).__name__)
        exc = ServiceUnavailable()
    elif isinstance(exc, DatabaseError):
        return None  # any other database error is a bug: let it reach the 500 handler and the log
    if not isinstance(exc, exceptions.APIException):
        return None
    if isinstance(exc, ApiError):
        code, message = exc.default_code, str(exc.detail)
    else:
        code, message = _from_drf(exc, context.get("view"))
    headers: dict[str, str] = {}
    if isinstance(exc, InsufficientScope):
        headers["WWW-Authenticate"] = f'Bearer realm="api", error="insufficient_scope", scope="{exc.scope}"'
    wait = getattr(exc, "wait", None)
    if wait is not None:
        headers["Retry-After"] = str(max(1, int(wait + 0.999)))
    return error_response(exc.status_code, code, message, headers)


# --- webhook triggers (ingestion/triggers.py) --------------------------------------------------------------------
class InvalidWebhookToken(Unauthorized):
    default_code = "invalid_webhook_token"
    default_detail = (
        "Invalid webhook token. Send the trigger's webhookToken (pwh_…) as 'Authorization: Bearer <token>'; "
        "an API key does not fire webhooks."
    )


class TriggerLimitReached(ApiError):
    default_code = "trigger_limit_reached"


class RevokedWebhookTrigger(Unauthorized):
    default_code = "revoked_webhook_trigger"
    default_detail = "This webhook trigger has been revoked. Create a new one in the console under Webhooks."


class InvalidWebhookSignature(Unauthorized):
    default_code = "invalid_signature"
    default_detail = (
        "The X-Hub-Signature-256 does not match this trigger's signing secret (or the trigger has none). "
        "Sign the exact body with the pws_ secret shown when the trigger was made, or send its token instead."
    )


# --- MCP connections, the calendar and the mailbox (ingestion/mcp.py, ingestion/mailcal.py) -----------------------
class ConnectionNotFound(NotFound):
    default_detail = "No MCP connection with this id belongs to you. `GET /api/v1/mcp/connections` lists yours."


class McpServerUnusable(ApiError):
    default_code = "mcp_server_unusable"


class McpAuthenticationRequired(ApiError):
    default_code = "mcp_authentication_required"


class McpOAuthRequired(ApiError):
    """The server signs in with OAuth. The body also carries ``"error": "OAUTH_REQUIRED"``, Poke's own answer, on
    which the official CLI tells the person to add the server from the web app."""

    default_code = "mcp_oauth_required"
    default_detail = (
        "This MCP server signs in with OAuth. Add it from the web console (Connections), where you sign in at the "
        "server; the CLI cannot do that sign-in."
    )


class TooManyConnectionChecks(RateLimited):
    default_code = "too_many_connection_checks"


class ConnectionChecksBusy(TooManyConnectionChecks):
    default_code = "connection_checks_busy"


class TunnelsNotSupported(ApiError):
    default_code = "tunnels_not_supported"
    default_detail = (
        "Tunnels are not available on this server: `poke tunnel` needs Poke's hosted tunnel service and a tunnel "
        "agent downloaded from the internet. Serve your MCP server at an address this server can reach and add it "
        "with `poke mcp add <url> --name <name>` instead."
    )


class MailCalendarUnusable(ApiError):
    default_code = "mail_calendar_unusable"


class MailCalendarLoginRefused(ApiError):
    default_code = "mail_calendar_login_refused"


class ConnectionExists(ApiError):
    default_code = "connection_exists"
