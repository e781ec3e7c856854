"""What the OpenAPI document (drf-spectacular, /api/schema/) says about the API: bodies, every error, the headers,
and the Bearer scheme. The views only name the description they use; the words live here.

A new endpoint gets an ``extend_schema`` here with ``responses=responses(<error statuses>, success=...)`` and
``parameters=COMMON_RESPONSE_HEADERS``; tests/test_openapi.py then fuzzes it with schemathesis.
"""

import re
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers

from accounts.models import Channel
from conversations.models import DeliveryStatus
from ops.errors import ERROR_CODES

_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def _plain(when: str) -> str:
    """The error code's words (ops/errors.py) without their links, which point nowhere in the document."""
    return _MARKDOWN_LINK.sub(r"\g<1>", when)


class ErrorSerializer(serializers.Serializer):
    success = serializers.BooleanField(help_text="Always false.")
    message = serializers.CharField(help_text="What went wrong and how to fix it, in one sentence.")
    code = serializers.ChoiceField(
        choices=[(code, _plain(ERROR_CODES[code].when)) for code in sorted(ERROR_CODES)],
        help_text="Stable snake_case code, one of the list below (ops/errors.py).",
    )
    retryAfterMs = serializers.IntegerField(  # the name the official clients read
        required=False,
        min_value=0,
        help_text="429 only: how long to wait before retrying, in milliseconds (Retry-After says it in seconds).",
    )


class SentSerializer(serializers.Serializer):
    success = serializers.BooleanField(help_text="True: the message is in the assistant conversation.")
    message = serializers.CharField(help_text="Message sent successfully")
    id = serializers.RegexField(r"^msg_[0-9A-Za-z]{24}$", help_text="The message's id: its receipt's address.")


class LegacySentSerializer(SentSerializer):
    channel = serializers.ChoiceField(choices=Channel.choices, help_text="The user's preferred messaging channel.")
    phoneNumber = serializers.CharField(help_text="The user's phone number, international format (E.164).")


class ReplySerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class ReceiptActionSerializer(serializers.Serializer):
    tool = serializers.CharField(help_text="The tool's name as its server (or the assistant) knows it.")
    connection = serializers.CharField(
        allow_null=True, help_text="The MCP connection's name; null for a built-in tool."
    )
    arguments = serializers.JSONField(help_text="The arguments the model called it with (a JSON object).")
    result = serializers.CharField(allow_blank=True, help_text="What the tool answered (or the error).")
    isError = serializers.BooleanField()
    startedAt = serializers.DateTimeField()
    finishedAt = serializers.DateTimeField(allow_null=True)
    followUps = serializers.IntegerField(min_value=0, help_text="Follow-ups the tool posted back later.")


class ReceiptSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    message = serializers.CharField(help_text="Where the delivery stands, in words.")
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField(min_value=0)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    reply = ReplySerializer(
        allow_null=True,
        required=False,
        help_text=(
            "The assistant's reply (null until it arrives). Present only when the key may read replies, a permission "
            "its owner gives on the key's page (off by default): the reply is meant for the person, not the caller."
        ),
    )
    actions = ReceiptActionSerializer(
        many=True,
        required=False,
        help_text="What the assistant did while answering (its tool calls), under the same permission as `reply`.",
    )
    test = serializers.BooleanField(
        required=False,
        help_text="Present, and true, only for a test key's message: answered apart from the person's thread, with no "
        "tool, no text to their phone and no approval asked.",
    )


# Each error status is described by the codes ops/errors.py lists for it (those the public endpoints answer).
_HEADER_NOTES = {
    401: " Carries WWW-Authenticate: Bearer.",
    409: " Carries Retry-After.",
    429: " Carries Retry-After.",
    503: " Carries Retry-After.",
}


def error_description(status: int) -> str:
    """'code: when; code: when.' for every listed code of this status that the public endpoints answer."""
    entries = [entry for entry in ERROR_CODES.values() if entry.status == status and entry.in_openapi]
    if not entries:
        raise ValueError(
            f"an operation documents a {status} response but no code in ERROR_CODES (ops/errors.py) has status "
            f"{status} and in_openapi=True: mark the code it answers in_openapi=True, or drop {status} from responses()"
        )
    described = "; ".join(f"{entry.code}: {_plain(entry.when)}" for entry in entries)
    return f"{described}.{_HEADER_NOTES.get(status, '')}"


_SENDING_ERRORS = (400, 401, 405, 409, 411, 413, 415, 422, 429, 503)
_KEY_SENDING_ERRORS = (*_SENDING_ERRORS, 403)  # 403: the key lacks messages:send


def _header(name: str, description: str, statuses: list[int] | bool = True) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.STR, location=OpenApiParameter.HEADER, response=statuses, description=description
    )


COMMON_RESPONSE_HEADERS = [
    _header("X-Request-ID", "The caller's X-Request-ID when it is plain and short, else a new id."),
    _header("RateLimit-Policy", 'The limit that counted this request, e.g. "per-key";q=60;w=60.', [200, 429]),
    _header("RateLimit", 'What is left of it, e.g. "per-key";r=59;t=41 (remaining, seconds to reset).', [200, 429]),
    _header("Retry-After", "Seconds to wait before retrying.", [409, 429, 503]),
    _header("Idempotent-Replayed", "true when this is the stored response to an earlier request.", [200]),
]

_SENDING_REQUEST_HEADERS = [
    OpenApiParameter(
        "Idempotency-Key",
        {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
        location=OpenApiParameter.HEADER,
        required=False,
        description=(
            "Makes retries safe: a retry with the same key and body gets the first response, for 24 hours, "
            "and records nothing new. A UUID is ideal."
        ),
    ),
    OpenApiParameter(
        "X-Request-ID",
        {"type": "string", "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$"},
        location=OpenApiParameter.HEADER,
        required=False,
        description="Your id for this request, echoed back and kept with the delivery.",
    ),
]

_MESSAGE = {
    "type": "string",
    "minLength": 1,
    "description": "The instruction or question for the assistant; not blank.",
}


def responses(*statuses: int, success: Any) -> dict[int, OpenApiResponse]:
    described: dict[int, OpenApiResponse] = {200: OpenApiResponse(success, description="Accepted.")}
    for status in statuses:
        if status != 200:
            described[status] = OpenApiResponse(ErrorSerializer, description=error_description(status))
    return described


_EXAMPLE = OpenApiExample("A reminder", value={"message": "Remind me to call Sam at 5pm"}, request_only=True)

current_endpoint = extend_schema(
    operation_id="send_message",
    summary="Send a message to the key owner's assistant",
    description=(
        "Any non-empty JSON object; the whole body is forwarded to the assistant as context. `message`, when "
        "present, must be a non-blank string. Or the message as plain text (`text/plain`, UTF-8; one final line "
        'break is dropped), forwarded as `{"message": <text>}`; same size limit and errors. Any other media type, '
        "such as curl -d's default `application/x-www-form-urlencoded`, gets 415. V2 keys only."
    ),
    request={
        "application/json": {
            "type": "object",
            "minProperties": 1,
            "properties": {"message": _MESSAGE},
            "additionalProperties": True,
        },
        "text/plain": {"type": "string", "minLength": 1, "pattern": r"\S", "example": "Backup finished on db-1"},
    },
    responses=responses(*_KEY_SENDING_ERRORS, success=SentSerializer),
    parameters=_SENDING_REQUEST_HEADERS + COMMON_RESPONSE_HEADERS,
    examples=[_EXAMPLE],
    tags=["messages"],
)

legacy_endpoint = extend_schema(
    operation_id="send_message_legacy",
    summary="Send a message (legacy, deprecated; V1 pk_ keys)",
    description=(
        "Deprecated: use POST /api/v1/inbound/api-message with a V2 key. Responses carry Deprecation, "
        'Link rel="successor-version" and, once a removal date is set, Sunset.'
    ),
    deprecated=True,
    request={
        "application/json": {
            "type": "object",
            "required": ["message"],
            "properties": {"message": _MESSAGE},
            "additionalProperties": True,
        }
    },
    responses=responses(*_KEY_SENDING_ERRORS, success=LegacySentSerializer),
    parameters=_SENDING_REQUEST_HEADERS + COMMON_RESPONSE_HEADERS,
    examples=[_EXAMPLE],
    tags=["messages"],
)


_WAIT = OpenApiParameter(
    "wait",
    {"type": "number", "minimum": 0, "maximum": 30},
    location=OpenApiParameter.QUERY,
    required=False,
    description=(
        "Seconds (0 to 30) to wait for the message to be final (failed, or delivered: with the assistant's reply "
        "for a key that reads replies) before answering; the answer comes as soon as it is. When this server "
        "process already has as many waiting as it allows: 503 receipt_waits_busy with Retry-After."
    ),
)

receipt_endpoint = extend_schema(
    operation_id="get_message_receipt",
    summary="What became of a message you sent",
    description=(
        "Only with the key (V1 or V2) that sent the message: any other key, even of the same account, gets 404. "
        "Status, attempts and times; the assistant's reply (`reply`) only for a key whose owner allowed it "
        '("may read replies" on the key\'s console page, off by default). `?wait=N` answers once the message is '
        "final, within N seconds."
    ),
    responses=responses(400, 401, 403, 404, 429, 503, success=ReceiptSerializer),
    parameters=[_WAIT, *COMMON_RESPONSE_HEADERS],
    tags=["messages"],
)


class MessageListSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    messages = ReceiptSerializer(many=True, help_text="The key's messages, newest first, each as its receipt.")
    next_cursor = serializers.CharField(
        allow_null=True, help_text="Pass as `cursor` for the next page; null on the last page. Opaque."
    )


message_list_endpoint = extend_schema(
    operation_id="list_messages",
    summary="What this key sent, newest first",
    description=(
        "The messages sent with this key (V1 or V2, scope receipts:read), newest first, each as its receipt (the "
        "reply only for a key that reads replies). A page at a time: pass `next_cursor` back as `cursor`."
    ),
    parameters=[
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            location=OpenApiParameter.QUERY,
            required=False,
            description="Messages per page, 1 to 100.",
        ),
        OpenApiParameter(
            "cursor",
            OpenApiTypes.STR,
            location=OpenApiParameter.QUERY,
            required=False,
            description="The previous page's next_cursor.",
        ),
        *COMMON_RESPONSE_HEADERS,
    ],
    responses=responses(400, 401, 403, 429, 503, success=MessageListSerializer),
    tags=["messages"],
)


class TriggerCreatedSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    triggerId = serializers.RegexField(r"^trg_[0-9A-Za-z]{20}$", help_text="The trigger's id.")
    webhookUrl = serializers.URLField(help_text="Where the sender POSTs; absolute.")
    webhookToken = serializers.RegexField(
        r"^pwh_[0-9A-Za-z]{38}$", help_text="The sender's Bearer token. Shown this once; only a hash is kept."
    )
    signingSecret = serializers.CharField(
        required=False, help_text="Only when created with signed=true: the secret for X-Hub-Signature-256."
    )
    condition = serializers.CharField()
    action = serializers.CharField()
    createdAt = serializers.DateTimeField()


class WebhookReceivedSerializer(serializers.Serializer):
    success = serializers.BooleanField(help_text="True: the action is in the owner's conversation.")
    message = serializers.CharField()
    id = serializers.RegexField(
        r"^msg_[0-9A-Za-z]{24}$", required=False, help_text="The recorded message's id (absent for a GitHub ping)."
    )


class TriggerFiringSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the request (the first of a coalesced line) came.")
    lastAt = serializers.DateTimeField(help_text="The last request this line counts.")
    outcome = serializers.ChoiceField(["accepted", "duplicate", "ping", "refused"])
    code = serializers.CharField(allow_null=True, help_text="A refused request's error code (the `code` it got).")
    count = serializers.IntegerField(help_text="Requests this line stands for: refusals of one kind coalesce.")
    summary = serializers.CharField(help_text="One line about the payload; never a token, signature or secret.")
    messageId = serializers.CharField(allow_null=True, help_text="The message an accepted firing recorded.")
    deliveryStatus = serializers.ChoiceField(
        ["queued", "processing", "delivered", "failed", "awaiting_approval"],
        allow_null=True,
        help_text="What became of that message; awaiting_approval: the assistant waits for the person's approval.",
    )


class TriggerLogSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    triggerId = serializers.RegexField(r"^trg_[0-9A-Za-z]{20}$")
    firings = TriggerFiringSerializer(many=True, help_text="The last 100 requests, newest first.")


class DeviceCodeSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    deviceCode = serializers.CharField(help_text="The CLI's secret for polling; 190 random bits.")
    userCode = serializers.RegexField(r"^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$")
    verificationUri = serializers.URLField()
    verificationUriComplete = serializers.URLField()
    expiresIn = serializers.IntegerField(help_text="Seconds.")
    interval = serializers.IntegerField(help_text="Seconds between polls.")


class DevicePollSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    status = serializers.ChoiceField(choices=["pending", "authenticated"])
    message = serializers.CharField()
    token = serializers.CharField(required=False, help_text="With authenticated, once: a V2 API key.")
    interval = serializers.IntegerField(required=False)


class DevicePollRefusedSerializer(ErrorSerializer):
    status = serializers.ChoiceField(choices=["invalid", "expired", "slow_down"])


class ProfileSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    id = serializers.IntegerField()
    name = serializers.CharField(allow_null=True)
    email = serializers.EmailField(allow_blank=True)


_DEVICE_CODE = OpenApiParameter(
    "device_code",
    {"type": "string", "pattern": "^pdc_[0-9A-Za-z]{38}$"},
    location=OpenApiParameter.PATH,
    description="The deviceCode from POST /api/v1/cli-auth/code.",
)
_TRIGGER_ID = OpenApiParameter(
    "trigger_id",
    {"type": "string", "pattern": "^trg_[0-9A-Za-z]{20}$"},
    location=OpenApiParameter.PATH,
    description="The triggerId; the webhookUrl has it.",
)

_TRIGGER_EXAMPLE = OpenApiExample(
    "A shop's new orders",
    value={"condition": "When a new order is placed", "action": "Send me a summary of the order"},
    request_only=True,
)

create_trigger_endpoint = extend_schema(
    operation_id="create_webhook_trigger",
    summary="Make a webhook trigger (the SDK's create_webhook)",
    description=(
        "`condition` (when it fires, up to 500 characters) and `action` (what the assistant should do, up to 2000) "
        "are required non-blank strings; `signed: true` adds a signing secret for senders that cannot set an "
        "Authorization header. The token (and secret) are shown this once."
    ),
    request={
        "application/json": {
            "type": "object",
            "required": ["condition", "action"],
            "properties": {
                "condition": {"type": "string", "minLength": 1, "maxLength": 500},
                "action": {"type": "string", "minLength": 1, "maxLength": 2000},
                "signed": {"type": "boolean"},
            },
            "additionalProperties": True,
        }
    },
    responses={
        201: OpenApiResponse(TriggerCreatedSerializer, description="Created."),
        **{
            status: OpenApiResponse(ErrorSerializer, description=error_description(status))
            for status in (400, 401, 403, 405, 411, 413, 415, 429, 503)
        },
        409: OpenApiResponse(
            ErrorSerializer, description="The account holds as many active triggers as it may (trigger_limit_reached)."
        ),
    },
    parameters=COMMON_RESPONSE_HEADERS,
    examples=[_TRIGGER_EXAMPLE],
    tags=["webhook triggers"],
)

trigger_log_endpoint = extend_schema(
    operation_id="get_webhook_trigger_log",
    summary="A webhook trigger's delivery log",
    description=(
        "The trigger's last 100 requests, newest first: accepted (with the message it recorded and its status), "
        "duplicate, GitHub's ping, or refused with its error code; refusals of one kind within a minute are one "
        "line with a count. Only a trigger of the key's own account (else 404)."
    ),
    responses=responses(401, 403, 404, 405, 429, 503, success=TriggerLogSerializer),
    parameters=[_TRIGGER_ID, *COMMON_RESPONSE_HEADERS],
    tags=["webhook triggers"],
)

fire_trigger_endpoint = extend_schema(
    operation_id="fire_webhook_trigger",
    summary="Fire a webhook trigger (the SDK's send_webhook)",
    description=(
        "Any non-empty JSON object, forwarded whole as the message's context; the message's text is the trigger's "
        "action, naming its condition (with a one-line summary of GitHub and Alertmanager payloads). Authenticated "
        "by the trigger's token, not an API key; Idempotency-Key, limits and errors as for send_message."
    ),
    request={"application/json": {"type": "object", "minProperties": 1, "additionalProperties": True}},
    responses={
        200: OpenApiResponse(WebhookReceivedSerializer, description="Recorded."),
        **{
            status: OpenApiResponse(ErrorSerializer, description=error_description(status))
            for status in _SENDING_ERRORS
        },
    },
    parameters=[_TRIGGER_ID, *_SENDING_REQUEST_HEADERS, *COMMON_RESPONSE_HEADERS],
    tags=["webhook triggers"],
)

fire_trigger_by_token_endpoint = extend_schema(
    operation_id="fire_webhook_trigger_by_token",
    summary="Fire a webhook trigger named by its token alone (the URL the SDK's triggers have)",
    description=(
        "The same as POST /api/v1/inbound/webhook/{trigger_id}, without the id in the path: the Bearer token names "
        "the trigger. No signature here (X-Hub-Signature-256 needs the trigger's own URL)."
    ),
    request={"application/json": {"type": "object", "minProperties": 1, "additionalProperties": True}},
    responses={
        200: OpenApiResponse(WebhookReceivedSerializer, description="Recorded."),
        **{
            status: OpenApiResponse(ErrorSerializer, description=error_description(status))
            for status in _SENDING_ERRORS
        },
    },
    parameters=[*_SENDING_REQUEST_HEADERS, *COMMON_RESPONSE_HEADERS],
    tags=["webhook triggers"],
)


# --- MCP connections (`poke mcp add`) and their tools' follow-ups -------------------------------------------------


class McpToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_blank=True)
    inputSchema = serializers.JSONField(help_text="The tool's JSON Schema for its arguments.")


class McpConnectionSerializer(serializers.Serializer):
    id = serializers.RegexField(r"^mcp_[0-9A-Za-z]{20}$", help_text="The connection's id, for the other endpoints.")
    name = serializers.CharField()
    serverUrl = serializers.CharField()
    hasApiKey = serializers.BooleanField(help_text="Whether a key for the server is stored; the key is never shown.")
    active = serializers.BooleanField()
    serverName = serializers.CharField(allow_blank=True)
    lastSyncedAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()
    tools = McpToolSerializer(many=True)


class McpConnectionAnswerSerializer(McpConnectionSerializer):
    success = serializers.BooleanField()
    message = serializers.CharField(required=False)


class McpConnectionListSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    connections = McpConnectionSerializer(many=True)


class DoneSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    message = serializers.CharField()


class FollowUpRecordedSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    message = serializers.CharField()
    id = serializers.RegexField(r"^msg_[0-9A-Za-z]{24}$", help_text="The follow-up's id in the thread.")
    nextToken = serializers.CharField(allow_null=True, help_text="For the next follow-up; null after the last one.")


_CONNECTION_ID = OpenApiParameter(
    "connection_id",
    {"type": "string", "pattern": "^mcp_[0-9A-Za-z]{20}$"},
    location=OpenApiParameter.PATH,
    description="The connection's id (mcp_…), from adding or listing it.",
)
_MCP_ERRORS = (401, 403, 405, 429, 503)
_MCP_BODY_ERRORS = (400, 411, 413, 415)


def _mcp_responses(*statuses: int, success: Any, status: int = 200) -> dict[int, OpenApiResponse]:
    described = {status: OpenApiResponse(success, description="Done.")}
    for error in statuses:
        described[error] = OpenApiResponse(ErrorSerializer, description=error_description(error) or "See `code`.")
    return described


mcp_add_endpoint = extend_schema(
    operation_id="add_mcp_connection",
    summary="Connect an MCP server and list its tools (`poke mcp add`)",
    description=(
        "Connects to the server over Streamable HTTP (initialize, tools/list) before anything is stored. 422 when "
        "the server cannot be used (mcp_server_unusable, mcp_authentication_required), or mcp_oauth_required "
        '(with `"error": "OAUTH_REQUIRED"`) when it signs in with OAuth: add it from the console; 429 '
        "too_many_connection_checks or 503 connection_checks_busy while other checks run; 400 invalid_body for a "
        "bad name or serverUrl (http(s), public addresses only in production)."
    ),
    request={
        "application/json": {
            "type": "object",
            "required": ["name", "serverUrl"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 100},
                "serverUrl": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "http(s) URL."},
                "apiKey": {"type": "string", "description": "The server's key, sent as its Bearer token."},
            },
            "additionalProperties": True,
        }
    },
    responses=_mcp_responses(
        *_MCP_ERRORS, *_MCP_BODY_ERRORS, 409, 422, success=McpConnectionAnswerSerializer, status=201
    ),
    parameters=COMMON_RESPONSE_HEADERS,
    tags=["mcp connections"],
)

mcp_list_endpoint = extend_schema(
    operation_id="list_mcp_connections",
    summary="The account's MCP connections and their tools",
    responses=_mcp_responses(*_MCP_ERRORS, success=McpConnectionListSerializer),
    parameters=COMMON_RESPONSE_HEADERS,
    tags=["mcp connections"],
)

mcp_get_endpoint = extend_schema(
    operation_id="get_mcp_connection",
    summary="One MCP connection and its tools",
    responses=_mcp_responses(*_MCP_ERRORS, 404, success=McpConnectionAnswerSerializer),
    parameters=[_CONNECTION_ID, *COMMON_RESPONSE_HEADERS],
    tags=["mcp connections"],
)

mcp_remove_endpoint = extend_schema(
    operation_id="remove_mcp_connection",
    summary="Remove an MCP connection and its tools",
    responses=_mcp_responses(*_MCP_ERRORS, 404, success=DoneSerializer),
    parameters=[_CONNECTION_ID, *COMMON_RESPONSE_HEADERS],
    tags=["mcp connections"],
)

mcp_sync_endpoint = extend_schema(
    operation_id="sync_mcp_tools",
    summary="Read an MCP connection's tools again",
    description="A failure keeps the tools of the last good sync (422); busy checks as when adding.",
    request=None,
    responses=_mcp_responses(*_MCP_ERRORS, *_MCP_BODY_ERRORS, 404, 422, success=McpConnectionAnswerSerializer),
    parameters=[_CONNECTION_ID, *COMMON_RESPONSE_HEADERS],
    tags=["mcp connections"],
)

mcp_follow_up_endpoint = extend_schema(
    operation_id="post_tool_follow_up",
    summary="A long-running MCP tool's follow-up (poke.mcp callbacks)",
    description=(
        "For MCP servers, not API-key callers: `Authorization: Bearer <X-Poke-Callback-Token>`, a one-time token "
        "sent with the tool call; each answer carries `nextToken` while more are allowed. Sooner than the interval: "
        "429 with retryAfterMs."
    ),
    auth=[],
    request={
        "application/json": {
            "type": "object",
            "required": ["content"],
            "properties": {
                "content": {"type": "string", "minLength": 1, "maxLength": 50000},
                "hasMore": {"type": "boolean"},
            },
            "additionalProperties": True,
        }
    },
    responses=_mcp_responses(400, 401, 405, 411, 413, 415, 429, 503, success=FollowUpRecordedSerializer),
    parameters=COMMON_RESPONSE_HEADERS,
    tags=["mcp connections"],
)

# --- The person's calendar and mailbox (`/api/v1/connections/…`) ----------------------------------------------------


class CalendarAccountSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The connection's id.")
    serverUrl = serializers.CharField()
    username = serializers.CharField()
    calendarName = serializers.CharField(allow_blank=True)
    calendarUrl = serializers.CharField()
    createdAt = serializers.DateTimeField()


class MailAccountSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The connection's id.")
    address = serializers.EmailField()
    username = serializers.CharField()
    imapHost = serializers.CharField()
    imapPort = serializers.IntegerField()
    imapSecurity = serializers.CharField()
    smtpHost = serializers.CharField()
    smtpPort = serializers.IntegerField()
    smtpSecurity = serializers.CharField()
    draftsFolder = serializers.CharField(allow_blank=True)
    createdAt = serializers.DateTimeField()


class CalendarStateSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    calendar = CalendarAccountSerializer(allow_null=True, help_text="null when none is connected; never the password.")


class MailboxStateSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    mailbox = MailAccountSerializer(allow_null=True, help_text="null when none is connected; never the password.")


class CalendarConnectedSerializer(CalendarAccountSerializer):
    success = serializers.BooleanField()
    message = serializers.CharField()


class MailboxConnectedSerializer(MailAccountSerializer):
    success = serializers.BooleanField()
    message = serializers.CharField()


_SECURITY = {"type": "string", "enum": ["ssl", "starttls"], "description": "ssl (implicit TLS) or starttls."}
_CONNECTION_ADD_ERRORS = (*_MCP_ERRORS, *_MCP_BODY_ERRORS, 409, 422)
_CONNECTION_ADD_DESCRIPTION = (
    "We log in before anything is stored: 422 mail_calendar_login_refused when the server refuses the credentials, "
    "422 mail_calendar_unusable when it cannot be used; 409 connection_exists when one is connected already; 429 "
    "too_many_connection_checks or 503 connection_checks_busy while other checks run. The password is stored "
    "encrypted and never shown again."
)


def _connection_endpoints(kind: str, state: Any, connected: Any, body: dict[str, Any]) -> Any:
    """GET, POST and DELETE of /api/v1/connections/<kind>: the person's one calendar or mailbox."""
    return extend_schema_view(
        get=extend_schema(
            operation_id=f"get_{kind}_connection",
            summary=f"The connected {kind}, or null",
            responses=_mcp_responses(*_MCP_ERRORS, success=state),
            parameters=COMMON_RESPONSE_HEADERS,
            tags=["calendar and mailbox"],
        ),
        post=extend_schema(
            operation_id=f"connect_{kind}",
            summary=f"Connect the {kind} (we log in first)",
            description=_CONNECTION_ADD_DESCRIPTION,
            request={"application/json": body},
            responses=_mcp_responses(*_CONNECTION_ADD_ERRORS, success=connected, status=201),
            parameters=COMMON_RESPONSE_HEADERS,
            tags=["calendar and mailbox"],
        ),
        delete=extend_schema(
            operation_id=f"remove_{kind}_connection",
            summary=f"Remove the {kind}",
            responses=_mcp_responses(*_MCP_ERRORS, 404, success=DoneSerializer),
            parameters=COMMON_RESPONSE_HEADERS,
            tags=["calendar and mailbox"],
        ),
    )


calendar_endpoints = _connection_endpoints(
    "calendar",
    CalendarStateSerializer,
    CalendarConnectedSerializer,
    {
        "type": "object",
        "required": ["serverUrl", "username", "password"],
        "properties": {
            "serverUrl": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "The CalDAV URL."},
            "username": {"type": "string", "minLength": 1},
            "password": {"type": "string", "minLength": 1, "description": "An app password where the server has them."},
        },
        "additionalProperties": True,
    },
)

mailbox_endpoints = _connection_endpoints(
    "mailbox",
    MailboxStateSerializer,
    MailboxConnectedSerializer,
    {
        "type": "object",
        "required": ["address", "password", "imapHost", "smtpHost"],
        "properties": {
            "address": {"type": "string", "format": "email"},
            "username": {"type": "string", "description": "When it is not the address."},
            "password": {"type": "string", "minLength": 1},
            "imapHost": {"type": "string", "minLength": 1},
            "imapPort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "imapSecurity": _SECURITY,
            "smtpHost": {"type": "string", "minLength": 1},
            "smtpPort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "smtpSecurity": _SECURITY,
        },
        "additionalProperties": True,
    },
)

device_code_endpoint = extend_schema(
    operation_id="start_cli_login",
    summary="Start a CLI log-in (RFC 8628 device authorization)",
    description="No authentication and no body. Limited per client address.",
    request=None,
    responses={
        200: OpenApiResponse(DeviceCodeSerializer, description="Started."),
        405: OpenApiResponse(ErrorSerializer, description=error_description(405)),
        429: OpenApiResponse(ErrorSerializer, description="rate_limited: too many log-in codes from this address."),
        503: OpenApiResponse(ErrorSerializer, description=error_description(503)),
    },
    parameters=COMMON_RESPONSE_HEADERS,
    auth=[],
    tags=["cli log-in"],
)

device_poll_endpoint = extend_schema(
    operation_id="poll_cli_login",
    summary="Poll a CLI log-in",
    description=(
        "`pending` until the person approves on /device; then `authenticated` with the token, once. `expired` "
        "after 10 minutes; `invalid` for an unknown, used or denied code (`code` says which)."
    ),
    responses={
        200: OpenApiResponse(DevicePollSerializer, description="Pending, or authenticated."),
        400: OpenApiResponse(
            DevicePollRefusedSerializer, description="expired_token, device_code_used or access_denied."
        ),
        404: OpenApiResponse(DevicePollRefusedSerializer, description="invalid_device_code."),
        405: OpenApiResponse(ErrorSerializer, description="method_not_allowed: only GET."),
        429: OpenApiResponse(DevicePollRefusedSerializer, description="rate_limited (status slow_down)."),
        503: OpenApiResponse(ErrorSerializer, description=error_description(503)),
    },
    parameters=[_DEVICE_CODE, *COMMON_RESPONSE_HEADERS],
    auth=[],
    tags=["cli log-in"],
)

profile_endpoint = extend_schema(
    operation_id="get_user_profile",
    summary="Who the key belongs to (`poke whoami`)",
    description="With any key of the account, V2 or V1, or the token `poke login` stored (a V2 key).",
    responses=responses(401, 403, 405, 429, 503, success=ProfileSerializer),
    parameters=COMMON_RESPONSE_HEADERS,
    tags=["account"],
)


class _KeyScheme(OpenApiAuthenticationExtension):
    priority = 1
    description = ""

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": self.description}


class CurrentKeyScheme(_KeyScheme):
    target_class = "ingestion.authentication.V2KeyAuthentication"
    name = "apiKey"
    description = "A V2 API key (psk_…), created in the console under API Keys: `Authorization: Bearer <API_KEY>`."


class McpKeyScheme(CurrentKeyScheme):
    """A V2 key too (the CLI's token from `poke login` is one), through a class of its own (it never takes a
    remembered key unconfirmed). Its operations name the ``apiKey`` scheme, and it registers no component of its
    own: a second component called apiKey from another class makes drf-spectacular warn, and check --deploy fail."""

    target_class = "ingestion.mcp.McpKeyAuthentication"
    name: Any = []

    def get_security_requirement(self, auto_schema: Any) -> dict[str, list[str]]:
        return {CurrentKeyScheme.name: []}


class LegacyKeyScheme(_KeyScheme):
    target_class = "ingestion.authentication.V1KeyAuthentication"
    name = "legacyApiKey"
    description = "A V1 API key (pk_…), for the deprecated legacy endpoint only."


class AnyKeyScheme(_KeyScheme):
    target_class = "ingestion.authentication.AnyKeyAuthentication"
    name = "anyApiKey"
    description = "Any API key of the account, V2 (psk_…) or V1 (pk_…)."


class ReceiptScheme(_KeyScheme):
    target_class = "ingestion.triggers.KeyOrWebhookTokenAuthentication"
    name = "senderCredential"
    description = (
        "What sent the message: the API key (psk_… or pk_…), or the webhook token (pwh_…) of the trigger whose "
        "firing recorded it."
    )


class WebhookTokenScheme(_KeyScheme):
    target_class = "ingestion.triggers.WebhookTriggerAuthentication"
    name = "webhookToken"
    description = (
        "A webhook trigger's token (pwh_…), from its creation: `Authorization: Bearer <webhook token>`. Not an API "
        "key. A trigger with a signing secret also accepts, instead, GitHub's `X-Hub-Signature-256: sha256=<hex "
        "HMAC-SHA256 of the body>` on its own URL."
    )


# What API-key callers (and the official clients) use, and the assistant runtime's signed callback
# (/api/v1/assistant/replies), so that schemathesis fuzzes it like the rest.
PUBLIC_PATH_PREFIXES = (
    "/api/v1/inbound",
    "/api/v1/api-keys/",
    "/api/v1/cli-auth/",
    "/api/v1/user/",
    "/api/v1/assistant/replies",
    "/api/v1/mcp/",
    "/api/v1/connections/",
)


def only_public_endpoints(endpoints: list[tuple[str, Any, Any, Any]], **kwargs: Any) -> list[tuple[str, Any, Any, Any]]:
    return [endpoint for endpoint in endpoints if endpoint[0].startswith(PUBLIC_PATH_PREFIXES)]


# The sections of /api/docs/, in the order a newcomer needs them: sending a message first, the runtime's callback
# (not for API-key callers) last. A tag not listed here still gets a section, before the runtime's.
TAG_DESCRIPTIONS = {
    "messages": "Send an instruction into the person's conversation, and read what became of it (the receipt).",
    "webhook triggers": "Webhook URLs that turn another service's events into messages (poke webhook).",
    "mcp connections": "The person's MCP servers, whose tools the assistant may call (poke mcp add).",
    "calendar and mailbox": "The person's calendar (CalDAV) and mailbox (IMAP and SMTP), for the assistant's tools.",
    "cli log-in": "poke login: the device authorization that ends with an API key for the CLI.",
    "account": "Who the key belongs to (poke whoami).",
    "assistant runtime": "For the assistant runtime only: its signed reply to a message it accepted.",
}
_LAST_TAG = "assistant runtime"


def _tag_rank(tag: str) -> tuple[int, int]:
    listed = list(TAG_DESCRIPTIONS)
    if tag == _LAST_TAG:
        return (2, 0)
    return (0, listed.index(tag)) if tag in listed else (1, 0)


def _first_tag(item: dict[str, Any]) -> str:
    for operation in item.values():
        if isinstance(operation, dict) and operation.get("tags"):
            return str(operation["tags"][0])
    return ""


def _deprecated(item: dict[str, Any]) -> bool:
    return all(operation.get("deprecated", False) for operation in item.values() if isinstance(operation, dict))


def tidy_paths_and_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Document each path without the trailing slash the routes merely tolerate, mark request bodies required
    (drf-spectacular leaves hand-written request schemas optional), and order the sections (TAG_DESCRIPTIONS)."""
    paths = {path.rstrip("/") or "/": item for path, item in result.get("paths", {}).items()}
    # sorted() is stable: within a section the paths keep drf-spectacular's alphabetical order, deprecated ones last.
    result["paths"] = dict(
        sorted(paths.items(), key=lambda entry: (_tag_rank(_first_tag(entry[1])), _deprecated(entry[1])))
    )
    used = {tag for item in result["paths"].values() for operation in item.values() if isinstance(operation, dict)
            for tag in operation.get("tags", [])}  # fmt: skip
    result["tags"] = [
        {"name": tag, "description": TAG_DESCRIPTIONS[tag]} if tag in TAG_DESCRIPTIONS else {"name": tag}
        for tag in sorted(used, key=lambda tag: (_tag_rank(tag), tag))
    ]
    for item in result["paths"].values():
        for operation in item.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                operation["requestBody"]["required"] = True
    return result


class ReplyRecordedSerializer(serializers.Serializer):
    success = serializers.BooleanField(help_text="True: the reply is in the person's conversation.")
    message = serializers.CharField(help_text="Reply recorded, or: this reply was already recorded.")
    id = serializers.RegexField(r"^msg_[0-9A-Za-z]{24}$", help_text="The reply's id in the thread.")


def _webhook_header(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "string", "minLength": 1}, location=OpenApiParameter.HEADER, required=True,
        description=description,
    )  # fmt: skip


callback_endpoint = extend_schema(
    operation_id="record_assistant_reply",
    summary="The assistant runtime's reply to a message it accepted with 202 (signed)",
    description=(
        "For the assistant runtime, not for API-key callers: signed per Standard Webhooks with the shared "
        "`whsec_` secret (ASSISTANT_WEBHOOK_SECRET), the signature checked before the body is read. A message takes "
        "one reply; the same callback again changes nothing; a different reply is 409. Without a configured secret "
        "the endpoint is 404."
    ),
    auth=[],
    request={
        "application/json": {
            "type": "object",
            "required": ["message_id", "reply"],
            "properties": {
                "message_id": {"type": "string", "description": "The id of the message answered (msg_…)."},
                "reply": {"type": "string", "minLength": 1, "description": "The reply, not blank."},
            },
            "additionalProperties": True,
        }
    },
    parameters=[
        _webhook_header("webhook-id", "This callback's own id; the same id again is a retry and changes nothing."),
        _webhook_header("webhook-timestamp", "Unix seconds; within ASSISTANT_CALLBACK_TOLERANCE_SECONDS (300)."),
        _webhook_header("webhook-signature", "v1,<base64 HMAC-SHA256 of '{id}.{timestamp}.{body}'>, space-separated."),
        _header("X-Request-ID", "The caller's X-Request-ID when it is plain and short, else a new id."),
    ],
    responses=responses(400, 401, 404, 409, 413, 415, 503, success=ReplyRecordedSerializer),
    tags=["assistant runtime"],
)
