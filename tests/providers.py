"""The four channel providers, played by real HTTP servers on 127.0.0.1 (docs/howto/run-the-tests.md): each speaks its
provider's protocol for what this service calls (Twilio's Messages API through the official library, Meta's Graph
API, BlueBubbles' REST API, Telegram's Bot API), checks the credentials the way the provider does, records every
send, and can be told to fail or to answer slowly. Each also plays the provider's side of the callbacks: it builds
an inbound message or a status report, signed as the provider signs it (Twilio's own RequestValidator, Meta's
HMAC-SHA256 of the raw body, Telegram's secret header, BlueBubbles' secret URL), ready to POST to this service.

Use the ``providers`` fixture: it starts all four and points the settings at them (every channel configured).
``providers.twilio.sent`` then lists what reached "Twilio"; ``providers.twilio.inbound("+14155550134", "hi")`` is
the callback Twilio would make, to ``.post(live_server.url)`` over HTTP or ``.send(client)`` through Django's test
client."""

import base64
import hashlib
import hmac
import itertools
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client
from twilio.request_validator import RequestValidator

from tests.servers import send_json

# Credentials the fakes expect, and the settings the ``providers`` fixture sets.
TWILIO_ACCOUNT_SID = "AC" + "0" * 31 + "1"
TWILIO_AUTH_TOKEN = "twilio-auth-token-for-tests"
TWILIO_SMS_FROM = "+15005550006"
TWILIO_WHATSAPP_FROM = "+14155238886"
WHATSAPP_ACCESS_TOKEN = "meta-access-token-for-tests"
WHATSAPP_PHONE_NUMBER_ID = "106540352242922"
WHATSAPP_APP_SECRET = "meta-app-secret-for-tests"
WHATSAPP_VERIFY_TOKEN = "meta-verify-token-for-tests"
BLUEBUBBLES_PASSWORD = "bluebubbles-password-for-tests"
BLUEBUBBLES_WEBHOOK_SECRET = "bluebubbles-webhook-secret-for-tests"
TELEGRAM_BOT_TOKEN = "123456789:AAH-telegram-bot-token-for-tests"
TELEGRAM_BOT_USERNAME = "assistant_test_bot"
TELEGRAM_WEBHOOK_SECRET = "telegram-webhook-secret-for-tests"

_counter = itertools.count(1)


@dataclass
class Outgoing:
    """One message a fake provider accepted: to whom (our form of the address: E.164 or the chat id), the text, and
    the provider's id for it."""

    address: str
    text: str
    provider_message_id: str
    fields: dict[str, Any]  # everything the request carried (form fields or JSON)


@dataclass
class Callback:
    """A request the provider would make to this service: ``post`` it over HTTP or ``send`` it through a test
    client."""

    path: str  # with its query, if any
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"

    def post(self, base_url: str) -> tuple[int, bytes]:
        request = urllib.request.Request(
            base_url.rstrip("/") + self.path,
            data=self.body if self.method == "POST" else None,
            method=self.method,
            headers={"Content-Type": self.content_type, **self.headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def send(self, client: Client) -> Any:
        if self.method == "GET":
            return client.get(self.path, headers=self.headers)
        return client.generic(self.method, self.path, self.body, content_type=self.content_type, headers=self.headers)


@dataclass
class _Trouble:
    status: int
    body: bytes
    delay: float


class FakeProvider(ThreadingHTTPServer):
    """A provider's API on 127.0.0.1. Subclasses answer ``handle_post``; this records and misbehaves on request."""

    daemon_threads = True
    block_on_close = False
    name = "provider"

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sent: list[Outgoing] = []
        self.requests: list[tuple[str, dict[str, str], bytes]] = []  # path, headers (lower-cased), body
        self._troubles: list[_Trouble] = []
        self.delay = 0.0  # seconds before every answer (a slow provider)
        self.late = 0.0  # seconds between taking a message and answering (a provider whose answers come late)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def fail_next(self, status: int = 503, times: int = 1, *, delay: float = 0.0, body: Any = None) -> None:
        """The next ``times`` requests get ``status`` (after ``delay`` seconds) and are not sent."""
        raw = json.dumps(body if body is not None else {"error": "fake trouble"}).encode()
        self._troubles.extend(_Trouble(status, raw, delay) for _ in range(times))

    def texts_to(self, address: str) -> list[str]:
        return [message.text for message in self.sent if message.address == address]

    def handle_post(self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        raise NotImplementedError

    def handle_get(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        return 404, {"error": "not found"}

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up waiting hung up: expected with a slow provider

    def next_id(self) -> int:
        return next(_counter)


class _Handler(BaseHTTPRequestHandler):
    server: FakeProvider
    protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs
    # Headers and body are two writes: with Nagle's algorithm the body would wait for the client's delayed ACK
    # (40 ms on Linux) on every answer, which no real provider's server does.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        parts = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        with self.server.lock:
            self.server.requests.append((self.path, headers, body))
            trouble = self.server._troubles.pop(0) if self.server._troubles else None
        time.sleep(trouble.delay if trouble else self.server.delay)
        if trouble is not None:
            self._answer(trouble.status, trouble.body)
            return
        status, answer = self.server.handle_post(parts.path, query, headers, body)
        time.sleep(self.server.late)
        self._answer(status, json.dumps(answer).encode())

    def do_GET(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        parts = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        with self.server.lock:
            self.server.requests.append((self.path, headers, b""))
        status, answer = self.server.handle_get(parts.path, query, headers)
        self._answer(status, json.dumps(answer).encode())

    def _answer(self, status: int, raw: bytes) -> None:
        send_json(self, status, raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _basic_auth(headers: dict[str, str]) -> tuple[str, str]:
    scheme, _, encoded = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    return user, password


# --- Twilio ------------------------------------------------------------------------------------------------------


class FakeTwilio(FakeProvider):
    """Twilio's Messages API (``POST /2010-04-01/Accounts/{AccountSid}/Messages.json``, HTTP Basic with the account
    SID and auth token, a form body), answering 201 with a Message resource; its callbacks signed with
    X-Twilio-Signature by the official RequestValidator over PUBLIC_BASE_URL + path."""

    name = "Twilio"

    def __init__(self, public_base_url: str = "") -> None:
        super().__init__()
        self.public_base_url = public_base_url  # what the signature is computed over; the fixture sets it
        self.resources: list[dict[str, Any]] = []  # the Message resources it created, as the Messages list shows them

    def handle_post(self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if path != f"/2010-04-01/Accounts/{TWILIO_ACCOUNT_SID}/Messages.json":
            return 404, {"code": 20404, "message": "The requested resource was not found", "status": 404}
        if _basic_auth(headers) != (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN):
            return 401, {"code": 20003, "message": "Authenticate", "status": 401}
        form = {name: values[0] for name, values in parse_qs(body.decode(), keep_blank_values=True).items()}
        to = form.get("To", "")
        if not to or not (form.get("From") or form.get("MessagingServiceSid")):
            return 400, {"code": 21604, "message": "A 'To' and a 'From' are required.", "status": 400}
        if not form.get("Body") and not form.get("ContentSid"):  # a template (ContentSid) has its own text
            return 400, {"code": 21602, "message": "Message body is required.", "status": 400}
        if len(form.get("Body", "")) > 1600:
            return 400, {"code": 21617, "message": "The concatenated message body exceeds the 1600 character limit."}
        sid = f"SM{self.next_id():032x}"
        now = format_datetime(datetime.now(UTC), usegmt=True)
        resource = {
            "sid": sid,
            "account_sid": TWILIO_ACCOUNT_SID,
            "to": to,
            "from": form.get("From"),
            "messaging_service_sid": form.get("MessagingServiceSid"),
            "body": form.get("Body", ""),
            "status": "queued",
            "num_segments": "1",
            "num_media": "0",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "date_created": now,
            "date_updated": now,
            "date_sent": None,
            "price": None,
            "error_code": None,
            "error_message": None,
            "uri": f"/2010-04-01/Accounts/{TWILIO_ACCOUNT_SID}/Messages/{sid}.json",
            "subresource_uris": {},
        }
        with self.lock:
            self.sent.append(Outgoing(to.removeprefix("whatsapp:"), form.get("Body", ""), sid, form))
            # As listed later: sent at once (DateSent set), so that the Messages list finds it.
            self.resources.append({**resource, "status": "sent", "date_sent": now})
        return 201, resource

    def handle_get(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        """The Messages list (``GET .../Messages.json``), filtered as Twilio filters it: To, From, and DateSent
        on or after the given day (``DateSent>``: Twilio reads its date part), newest first."""
        messages_path = f"/2010-04-01/Accounts/{TWILIO_ACCOUNT_SID}/Messages.json"
        if path != messages_path:
            return 404, {"code": 20404, "message": "The requested resource was not found", "status": 404}
        if _basic_auth(headers) != (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN):
            return 401, {"code": 20003, "message": "Authenticate", "status": 401}
        after = query.get("DateSent>")
        day = datetime.fromisoformat(after.replace("Z", "+00:00")).date() if after else None
        with self.lock:
            found = [
                message
                for message in reversed(self.resources)
                if message["to"] == query.get("To", message["to"])
                and message["from"] == query.get("From", message["from"])
                and (day is None or parsedate_to_datetime(message["date_sent"]).date() >= day)
            ]
        size = int(query.get("PageSize", "50"))
        return 200, {
            "messages": found[:size],
            "page": 0,
            "page_size": size,
            "uri": messages_path,
            "first_page_uri": messages_path,
            "next_page_uri": None,
            "previous_page_uri": None,
            "start": 0,
            "end": max(len(found[:size]) - 1, 0),
        }

    def signed(self, path: str, form: dict[str, str], *, token: str = TWILIO_AUTH_TOKEN) -> Callback:
        signature = RequestValidator(token).compute_signature(self.public_base_url + path, form)
        return Callback(
            path, urlencode(form).encode(), "application/x-www-form-urlencoded", {"X-Twilio-Signature": signature}
        )

    def inbound(
        self,
        sender: str,
        text: str,
        *,
        whatsapp: bool = False,
        sid: str = "",
        media: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> Callback:
        """An incoming SMS (or WhatsApp message) from ``sender`` (E.164), as Twilio posts it."""
        prefix = "whatsapp:" if whatsapp else ""
        form = {
            "ToCountry": "US",
            "SmsMessageSid": sid or f"SM{self.next_id():032x}",
            "NumMedia": str(len(media)),
            "SmsSid": "",
            "SmsStatus": "received",
            "Body": text,
            "To": prefix + (TWILIO_WHATSAPP_FROM if whatsapp else TWILIO_SMS_FROM),
            "NumSegments": "1",
            "From": prefix + sender,
            "ApiVersion": "2010-04-01",
            "AccountSid": TWILIO_ACCOUNT_SID,
        }
        form["MessageSid"] = form["SmsSid"] = form["SmsMessageSid"]
        for index, (url, content_type) in enumerate(media):
            form[f"MediaUrl{index}"] = url
            form[f"MediaContentType{index}"] = content_type
        if whatsapp:
            form["ProfileName"] = "Test Person"
            form["WaId"] = sender.removeprefix("+")
        return self.signed("/channels/twilio/inbound", form)

    def status(self, sid: str, status: str, *, error_code: str = "") -> Callback:
        """The StatusCallback Twilio makes when message ``sid`` reaches ``status``."""
        sent = next((m for m in self.sent if m.provider_message_id == sid), None)
        form = {
            "MessageSid": sid,
            "SmsSid": sid,
            "MessageStatus": status,
            "SmsStatus": status,
            "AccountSid": TWILIO_ACCOUNT_SID,
            "To": sent.fields.get("To", "") if sent else "+14155550100",
            "From": sent.fields.get("From", "") if sent else TWILIO_SMS_FROM,
            "ApiVersion": "2010-04-01",
        }
        if error_code:
            form["ErrorCode"] = error_code
        return self.signed("/channels/twilio/status", form)


# --- WhatsApp Cloud API ------------------------------------------------------------------------------------------


class FakeWhatsAppCloud(FakeProvider):
    """Meta's Graph API for WhatsApp (``POST /{phone-number-id}/messages``, Bearer access token, JSON), answering
    with ``messages[0].id`` (a wamid); its webhook events signed with X-Hub-Signature-256.

    Two kinds of message: ``text`` (``text.body``), and ``template``: ``template.name`` and ``template.language.code``
    of a template approved for the business (``approve_template``; any other is refused as Meta refuses it, error
    132001), with ``components`` whose ``body`` carries exactly as many ``text`` parameters as the template's body
    has variables (else error 132000). A template's ``Outgoing.text`` is its parameters' text."""

    name = "WhatsApp Cloud API"

    def __init__(self) -> None:
        super().__init__()
        self.templates: dict[tuple[str, str], int] = {}  # (name, language code) → its body's variables

    def approve_template(self, name: str, language: str, *, parameters: int) -> None:
        self.templates[(name, language)] = parameters

    def handle_post(self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if headers.get("authorization") != f"Bearer {WHATSAPP_ACCESS_TOKEN}":
            return 401, _graph_error(190, "Invalid OAuth access token.")
        if path != f"/{WHATSAPP_PHONE_NUMBER_ID}/messages":
            return 400, _graph_error(100, "Unsupported post request.")
        request = json.loads(body)
        kind = request.get("type")
        if request.get("messaging_product") != "whatsapp" or not str(request.get("to", "")).isdigit():
            return 400, _graph_error(100, "(#100) Invalid parameter")
        if kind == "text":
            text = request.get("text", {}).get("body", "") if isinstance(request.get("text"), dict) else ""
            if not isinstance(text, str) or not text or len(text) > 4096:
                return 400, _graph_error(100, "(#100) Invalid parameter")
        elif kind == "template":
            refusal, text = self._template_text(request.get("template"))
            if refusal is not None:
                return 400, refusal
        elif kind == "interactive":
            refusal, text = _interactive_text(request.get("interactive"))
            if refusal is not None:
                return 400, refusal
        else:
            return 400, _graph_error(100, "(#100) Invalid parameter")
        wamid = f"wamid.HBgL{self.next_id():020d}"
        to = str(request["to"])
        with self.lock:
            self.sent.append(Outgoing("+" + to, text, wamid, request))
        return 200, {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": wamid, "message_status": "accepted"} if kind == "template" else {"id": wamid}],
        }

    def _template_text(self, template: Any) -> tuple[dict[str, Any] | None, str]:
        """(Meta's refusal, or None; the parameters' text) for a message's ``template`` object."""
        if not isinstance(template, dict) or not isinstance(template.get("name"), str):
            return _graph_error(131008, "(#131008) Required parameter is missing"), ""
        language = template.get("language")
        code = language.get("code") if isinstance(language, dict) else None
        if not isinstance(code, str):
            return _graph_error(131008, "(#131008) Required parameter is missing"), ""
        expected = self.templates.get((template["name"], code))
        if expected is None:
            return _graph_error(132001, "(#132001) Template name does not exist in the translation"), ""
        components = template.get("components", [])
        bodies = [c for c in components if isinstance(c, dict) and c.get("type") == "body"] if components else []
        parameters = bodies[0].get("parameters", []) if bodies else []
        texts = [p.get("text") for p in parameters if isinstance(p, dict) and p.get("type") == "text"]
        if len(texts) != len(parameters) or len(texts) != expected:
            mismatch = "(#132000) Number of parameters does not match the expected number of params"
            return _graph_error(132000, mismatch), ""
        if not all(isinstance(t, str) and t.strip() and len(t) <= 1024 for t in texts):
            return _graph_error(100, "(#100) Invalid parameter"), ""
        return None, " ".join(texts)

    def event(self, value: dict[str, Any], *, secret: str = WHATSAPP_APP_SECRET) -> Callback:
        payload = {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102290129340398",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": "15550783881",
                                    "phone_number_id": WHATSAPP_PHONE_NUMBER_ID,
                                },
                                **value,
                            },
                        }
                    ],
                }
            ],
        }
        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return Callback("/channels/whatsapp/webhook", body, "application/json", {"X-Hub-Signature-256": signature})

    def inbound(self, sender: str, text: str, *, wamid: str = "", image: str = "") -> Callback:
        """A message from ``sender`` (E.164): text, or with ``image`` (a media id) an image with ``text`` as caption."""
        digits = sender.removeprefix("+")
        message: dict[str, Any] = {
            "from": digits,
            "id": wamid or f"wamid.IN{self.next_id():020d}",
            "timestamp": str(int(time.time())),
        }
        if image:
            message.update(type="image", image={"id": image, "mime_type": "image/jpeg", "sha256": "x", "caption": text})
        else:
            message.update(type="text", text={"body": text})
        return self.event({"contacts": [{"profile": {"name": "Test Person"}, "wa_id": digits}], "messages": [message]})

    def button_reply(self, sender: str, button_id: str, title: str, *, to: str = "", wamid: str = "") -> Callback:
        """A tap on a reply button of the interactive message ``to`` (its wamid), from ``sender`` (E.164), as Meta
        posts it: a message of type ``interactive`` with ``button_reply`` and a ``context`` naming that message."""
        digits = sender.removeprefix("+")
        message: dict[str, Any] = {
            "context": {"from": "15550783881", "id": to},
            "from": digits,
            "id": wamid or f"wamid.IN{self.next_id():020d}",
            "timestamp": str(int(time.time())),
            "type": "interactive",
            "interactive": {"type": "button_reply", "button_reply": {"id": button_id, "title": title}},
        }
        return self.event({"contacts": [{"profile": {"name": "Test Person"}, "wa_id": digits}], "messages": [message]})

    def status(self, wamid: str, status: str, *, error_code: int = 0) -> Callback:
        sent = next((m for m in self.sent if m.provider_message_id == wamid), None)
        report: dict[str, Any] = {
            "id": wamid,
            "status": status,
            "timestamp": str(int(time.time())),
            "recipient_id": sent.address.removeprefix("+") if sent else "14155550100",
        }
        if error_code:
            report["errors"] = [{"code": error_code, "title": "Message undeliverable"}]
        return self.event({"statuses": [report]})

    def verification(self, token: str = WHATSAPP_VERIFY_TOKEN, challenge: str = "1158201444") -> Callback:
        query = urlencode({"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge})
        return Callback(f"/channels/whatsapp/webhook?{query}", b"", "", method="GET")


def _interactive_text(interactive: Any) -> tuple[dict[str, Any] | None, str]:
    """(Meta's refusal, or None; the body's text) for an ``interactive`` message of type ``button``, checked as Meta
    checks it: a body of 1 to 1,024 characters, 1 to 3 reply buttons with unique ids (at most 256 characters) and
    unique titles (1 to 20 characters)."""
    invalid = _graph_error(131009, "(#131009) Parameter value is not valid")
    if not isinstance(interactive, dict) or interactive.get("type") != "button":
        return invalid, ""
    body = interactive.get("body")
    text = body.get("text") if isinstance(body, dict) else None
    action = interactive.get("action")
    buttons = action.get("buttons") if isinstance(action, dict) else None
    if not isinstance(text, str) or not 0 < len(text) <= 1024 or not isinstance(buttons, list):
        return invalid, ""
    replies = [b.get("reply") for b in buttons if isinstance(b, dict) and b.get("type") == "reply"]
    ids = [r.get("id") for r in replies if isinstance(r, dict)]
    titles = [r.get("title") for r in replies if isinstance(r, dict)]
    if (
        not 0 < len(buttons) <= 3
        or len(ids) != len(buttons)
        or len(set(ids)) != len(ids)
        or len(set(titles)) != len(ids)
    ):
        return invalid, ""
    if not all(isinstance(i, str) and 0 < len(i) <= 256 for i in ids):
        return invalid, ""
    if not all(isinstance(t, str) and 0 < len(t) <= 20 for t in titles):
        return invalid, ""
    return None, text


def _graph_error(code: int, message: str) -> dict[str, Any]:
    """An error as the Graph API answers it."""
    return {"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEfGh"}}


# --- BlueBubbles -------------------------------------------------------------------------------------------------


class FakeBlueBubbles(FakeProvider):
    """A BlueBubbles server's REST API (``POST /api/v1/message/text?password=...``, JSON with chatGuid, tempGuid,
    message), answering with the message's guid; its webhook events posted to the URL that holds our secret."""

    name = "BlueBubbles"

    def handle_post(self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if query.get("password") != BLUEBUBBLES_PASSWORD:
            return 401, {"status": 401, "message": "You are not authorized to access this resource"}
        if path != "/api/v1/message/text":
            return 404, {"status": 404, "message": "Not found"}
        request = json.loads(body)
        chat = str(request.get("chatGuid", ""))
        if not chat.startswith("iMessage;-;") or not request.get("message") or not request.get("tempGuid"):
            return 400, {"status": 400, "message": "Bad request", "error": {"message": "chatGuid, tempGuid, message"}}
        guid = f"p:0/{secrets.token_hex(8).upper()}"
        with self.lock:
            self.sent.append(Outgoing(chat.removeprefix("iMessage;-;"), request["message"], guid, request))
        return 200, {
            "status": 200,
            "message": "Message sent!",
            "data": {"guid": guid, "tempGuid": request["tempGuid"], "text": request["message"], "isFromMe": True},
        }

    def event(self, kind: str, data: dict[str, Any], *, secret: str = BLUEBUBBLES_WEBHOOK_SECRET) -> Callback:
        query = f"?{urlencode({'secret': secret})}" if secret else ""
        body = json.dumps({"type": kind, "data": data}).encode()
        return Callback(f"/channels/bluebubbles/webhook{query}", body, "application/json")

    def inbound(self, sender: str, text: str, *, guid: str = "", attachments: list[dict[str, Any]] = ()) -> Callback:  # type: ignore[assignment]
        return self.event(
            "new-message",
            {
                "guid": guid or f"IN-{self.next_id():08d}",
                "text": text,
                "isFromMe": False,
                "handle": {"address": sender, "service": "iMessage"},
                "chats": [{"guid": f"iMessage;-;{sender}", "chatIdentifier": sender}],
                "attachments": list(attachments),
                "dateCreated": int(time.time() * 1000),
            },
        )

    def updated(self, guid: str, *, delivered: bool = True, read: bool = False, error: int = 0) -> Callback:
        now = int(time.time() * 1000)
        return self.event(
            "updated-message",
            {
                "guid": guid,
                "isFromMe": True,
                "dateDelivered": now if delivered else None,
                "dateRead": now if read else None,
                "error": error,
            },
        )


# --- Telegram ----------------------------------------------------------------------------------------------------


class FakeTelegram(FakeProvider):
    """Telegram's Bot API (``POST /bot<token>/<method>``, JSON): sendMessage (with an optional inline keyboard),
    answerCallbackQuery, editMessageText and setWebhook; updates posted with X-Telegram-Bot-Api-Secret-Token.
    ``answered`` lists the callback queries answered, ``edited`` the messages edited (each as its request)."""

    name = "Telegram"

    def __init__(self) -> None:
        super().__init__()
        self.webhook: dict[str, Any] = {}
        self.answered: list[dict[str, Any]] = []
        self.edited: list[dict[str, Any]] = []
        self.queries: set[str] = set()  # callback query ids sent out by ``press`` and not yet answered

    def handle_post(self, path: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        prefix = f"/bot{TELEGRAM_BOT_TOKEN}/"
        if not path.startswith(prefix):
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        method, request = path.removeprefix(prefix), json.loads(body or b"{}")
        if method == "setWebhook":
            self.webhook = request
            return 200, {"ok": True, "result": True, "description": "Webhook was set"}
        if method == "answerCallbackQuery":
            return self._answer_query(request)
        if method == "editMessageText":
            return self._edit(request)
        if method != "sendMessage":
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        if not str(request.get("text", "")).strip():
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message text is empty"}
        if len(request["text"]) > 4096:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}
        if "reply_markup" in request and not _inline_keyboard_ok(request["reply_markup"]):
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: can't parse inline keyboard"}
        message_id = self.next_id()
        with self.lock:
            self.sent.append(
                Outgoing(str(request["chat_id"]), request["text"], f"{request['chat_id']}:{message_id}", request)
            )
        return 200, {
            "ok": True,
            "result": {
                "message_id": message_id,
                "from": {"id": 123456789, "is_bot": True, "first_name": "Assistant", "username": TELEGRAM_BOT_USERNAME},
                "chat": {"id": request["chat_id"], "type": "private"},
                "date": int(time.time()),
                "text": request["text"],
            },
        }

    def _answer_query(self, request: dict[str, Any]) -> tuple[int, Any]:
        """Telegram refuses an unknown or already answered query ("query is too old ... or query ID is invalid")."""
        query = str(request.get("callback_query_id", ""))
        with self.lock:
            if query not in self.queries:
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: query ID is invalid"}
            self.queries.discard(query)
            self.answered.append(request)
        return 200, {"ok": True, "result": True}

    def _edit(self, request: dict[str, Any]) -> tuple[int, Any]:
        key = f"{request.get('chat_id')}:{request.get('message_id')}"
        with self.lock:
            original = next((m for m in self.sent if m.provider_message_id == key), None)
            if original is None:
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
            if not str(request.get("text", "")).strip():
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message text is empty"}
            self.edited.append(request)
        return 200, {"ok": True, "result": {"message_id": request["message_id"], "text": request["text"]}}

    def keyboard_of(self, message: Outgoing) -> list[dict[str, str]]:
        """The buttons under a sent message, in one row (none for a message without a keyboard)."""
        rows = message.fields.get("reply_markup", {}).get("inline_keyboard", [])
        return [button for row in rows for button in row]

    def press(
        self, message: Outgoing, data: str, *, from_id: int | None = None, update_id: int = 0, query_id: str = ""
    ) -> Callback:
        """A tap on an inline button of ``message`` (one we sent) carrying ``data``, as Telegram posts it: a
        ``callback_query`` update from the chat's person (``from_id`` to claim another)."""
        chat_id, _, message_id = message.provider_message_id.rpartition(":")
        query = query_id or str(self.next_id() * 1000003)
        with self.lock:
            self.queries.add(query)
        chat = int(chat_id)
        return self.update(
            {
                "update_id": update_id or self.next_id(),
                "callback_query": {
                    "id": query,
                    "from": {"id": chat if from_id is None else from_id, "is_bot": False, "first_name": "Test"},
                    "message": {
                        "message_id": int(message_id),
                        "from": {"id": 123456789, "is_bot": True, "first_name": "Assistant"},
                        "chat": {"id": chat, "first_name": "Test", "type": "private"},
                        "date": int(time.time()),
                        "text": message.fields.get("text", ""),
                        "reply_markup": message.fields.get("reply_markup", {}),
                    },
                    "chat_instance": "-5398120304421134118",
                    "data": data,
                },
            }
        )

    def update(self, update: dict[str, Any], *, secret: str = TELEGRAM_WEBHOOK_SECRET) -> Callback:
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {}
        return Callback("/channels/telegram/webhook", json.dumps(update).encode(), "application/json", headers)

    def inbound(self, chat_id: int, text: str, *, update_id: int = 0) -> Callback:
        """A private message from chat ``chat_id`` (``/start <token>`` is how a deep link arrives)."""
        return self.update(
            {
                "update_id": update_id or self.next_id(),
                "message": {
                    "message_id": self.next_id(),
                    "from": {"id": chat_id, "is_bot": False, "first_name": "Test", "language_code": "en"},
                    "chat": {"id": chat_id, "first_name": "Test", "type": "private"},
                    "date": int(time.time()),
                    "text": text,
                },
            }
        )


def _inline_keyboard_ok(markup: Any) -> bool:
    """An InlineKeyboardMarkup as Telegram accepts it: rows of buttons, each with a text and 1-64 bytes of
    callback_data."""
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return False
    buttons = [button for row in rows for button in row]
    return all(
        isinstance(b, dict)
        and isinstance(b.get("text"), str)
        and b["text"]
        and isinstance(b.get("callback_data"), str)
        and 0 < len(b["callback_data"].encode()) <= 64
        for b in buttons
    )


# --- All four, wired into the settings ---------------------------------------------------------------------------


@dataclass
class Providers:
    twilio: FakeTwilio
    whatsapp: FakeWhatsAppCloud
    bluebubbles: FakeBlueBubbles
    telegram: FakeTelegram

    def all(self) -> list[FakeProvider]:
        return [self.twilio, self.whatsapp, self.bluebubbles, self.telegram]


def configure(settings: Any, providers: Providers, public_base_url: str, *, whatsapp_through: str = "cloud") -> None:
    """Point every channel's settings at the fakes. ``whatsapp_through="twilio"`` leaves the Cloud API unconfigured,
    so that WhatsApp goes through Twilio."""
    settings.PUBLIC_BASE_URL = public_base_url
    providers.twilio.public_base_url = public_base_url
    settings.TWILIO_ACCOUNT_SID = TWILIO_ACCOUNT_SID
    settings.TWILIO_AUTH_TOKEN = TWILIO_AUTH_TOKEN
    settings.TWILIO_SMS_FROM = TWILIO_SMS_FROM
    settings.TWILIO_WHATSAPP_FROM = TWILIO_WHATSAPP_FROM
    settings.TWILIO_API_BASE_URL = providers.twilio.url
    cloud = whatsapp_through == "cloud"
    settings.WHATSAPP_CLOUD_ACCESS_TOKEN = WHATSAPP_ACCESS_TOKEN if cloud else ""
    settings.WHATSAPP_CLOUD_PHONE_NUMBER_ID = WHATSAPP_PHONE_NUMBER_ID
    settings.WHATSAPP_CLOUD_APP_SECRET = WHATSAPP_APP_SECRET
    settings.WHATSAPP_CLOUD_VERIFY_TOKEN = WHATSAPP_VERIFY_TOKEN
    settings.WHATSAPP_CLOUD_API_BASE_URL = providers.whatsapp.url
    settings.BLUEBUBBLES_URL = providers.bluebubbles.url
    settings.BLUEBUBBLES_PASSWORD = BLUEBUBBLES_PASSWORD
    settings.BLUEBUBBLES_WEBHOOK_SECRET = BLUEBUBBLES_WEBHOOK_SECRET
    settings.TELEGRAM_BOT_TOKEN = TELEGRAM_BOT_TOKEN
    settings.TELEGRAM_BOT_USERNAME = TELEGRAM_BOT_USERNAME
    settings.TELEGRAM_WEBHOOK_SECRET = TELEGRAM_WEBHOOK_SECRET
    settings.TELEGRAM_API_BASE_URL = providers.telegram.url
    settings.CHANNEL_TIMEOUT_SECONDS = 2


def _serve(server: FakeProvider) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def providers(settings: Any) -> Iterator[Providers]:
    """All four fake providers running, every channel configured to use them, PUBLIC_BASE_URL "http://testserver"
    (what Django's test client calls). With a live server, call ``configure(settings, providers, live_server.url)``
    again."""
    running = Providers(FakeTwilio(), FakeWhatsAppCloud(), FakeBlueBubbles(), FakeTelegram())
    for server in running.all():
        _serve(server)
    configure(settings, running, "http://testserver")
    try:
        yield running
    finally:
        for server in running.all():
            server.shutdown()
            server.server_close()
