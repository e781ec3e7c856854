"""A stand-in for Microsoft Graph's calendar API on 127.0.0.1 (a real HTTP server), for the subset the assistant
uses, in the shapes of Microsoft's documentation:

- ``GET /me/calendar``: the default calendar (``id``, ``name``);
- ``GET /me/calendarView?startDateTime=&endDateTime=``: the events overlapping the window, repeating ones expanded
  into occurrences (``type`` "occurrence", ``seriesMasterId``), sorted by start, ``$top`` a page, the next page's
  URL in ``@odata.nextLink``; times in UTC when asked with ``Prefer: outlook.timezone="UTC"``, else in the zone
  each event was created in; all-day events (``isAllDay``) as Graph says them whatever the Prefer: midnight to
  midnight in the zone they were made in;
- ``POST /me/events`` (201, the event with its ``id``), ``GET`` and ``DELETE /me/events/{id}`` (204);
- errors as ``{"error": {"code", "message"}}``: 401 InvalidAuthenticationToken for a token that is not active or
  not for Graph (another resource's audience), 403 ErrorAccessDenied without ``Calendars.ReadWrite``, 404
  ErrorItemNotFound; a test can make the next answers fail (``fail_next``: 429 with Retry-After, 503, ...).

Tokens are checked with the test authorization server's introspection endpoint (tests/oauth_server.py), as the
other OAuth peers of the tests do.
"""

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit
from zoneinfo import ZoneInfo

from dateutil import rrule

from tests.oauth_server import OAuthServer, introspect, resource_of

CALENDAR_SCOPE = "https://graph.microsoft.com/Calendars.ReadWrite"
_FREQUENCIES = {
    "daily": rrule.DAILY,
    "weekly": rrule.WEEKLY,
    "absoluteMonthly": rrule.MONTHLY,
    "relativeMonthly": rrule.MONTHLY,
    "absoluteYearly": rrule.YEARLY,
}
_WEEKDAYS = {
    name: day
    for name, day in zip(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        (rrule.MO, rrule.TU, rrule.WE, rrule.TH, rrule.FR, rrule.SA, rrule.SU),
        strict=True,
    )
}
_INDEX = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}


@dataclass
class Graph:
    url: str = ""  # like https://graph.microsoft.com/v1.0
    events: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # address -> id -> event
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # method, path, headers
    fail_next: list[tuple[int, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    page_size: int = 50  # the most one page holds, whatever $top says
    next_link_base: str = ""  # where @odata.nextLink points ("" : here)
    calendar_name: str = "Calendar"
    refused: int = 0

    def add(self, address: str, subject: str, start: str, end: str, zone: str = "UTC", **extra: Any) -> str:
        """An event as the person's other apps would have made it."""
        identifier = "AAMk" + secrets.token_urlsafe(18)
        self.events.setdefault(address, {})[identifier] = {
            "id": identifier,
            "subject": subject,
            "start": {"dateTime": start, "timeZone": zone},
            "end": {"dateTime": end, "timeZone": zone},
            "originalStartTimeZone": zone,
            "isAllDay": False,
            "location": {"displayName": ""},
            **extra,
        }
        return identifier

    def of(self, address: str) -> list[dict[str, Any]]:
        return list(self.events.get(address, {}).values())


def _graph_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.0000000")


def _aware(value: dict[str, Any]) -> datetime:
    parsed = datetime.fromisoformat(str(value["dateTime"]).split(".")[0])
    return parsed.replace(tzinfo=ZoneInfo(value.get("timeZone") or "UTC"))


def _occurrences(event: dict[str, Any], window_end: datetime) -> list[tuple[datetime, datetime]]:
    start, end = _aware(event["start"]), _aware(event["end"])
    pattern = (event.get("recurrence") or {}).get("pattern")
    if not pattern:
        return [(start, end)]
    span = event["recurrence"]["range"]
    options: dict[str, Any] = {"interval": int(pattern.get("interval", 1)), "dtstart": start.replace(tzinfo=None)}
    days = [_WEEKDAYS[name] for name in pattern.get("daysOfWeek", [])]
    if pattern["type"] == "relativeMonthly":
        days = [day(_INDEX[pattern["index"]]) for day in days]
    if days:
        options["byweekday"] = days
    if pattern["type"] == "absoluteMonthly":
        options["bymonthday"] = int(pattern["dayOfMonth"])
    if span["type"] == "numbered":
        options["count"] = int(span["numberOfOccurrences"])
    elif span["type"] == "endDate":
        options["until"] = datetime.combine(date.fromisoformat(span["endDate"]), datetime.max.time())
    else:
        options["until"] = window_end.astimezone(start.tzinfo).replace(tzinfo=None)
    length = end - start
    found = []
    for local in rrule.rrule(_FREQUENCIES[pattern["type"]], **options):
        first = local.replace(tzinfo=start.tzinfo)  # the same local hour in the event's zone, whatever the DST
        found.append((first, first + length))
        if len(found) > 1000:
            break
    return found


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    return status, {}, {"error": {"code": code, "message": message, "innerError": {"request-id": "test"}}}


def _handler(state: Graph, oauth: OAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, headers: dict[str, str], body: dict[str, Any] | None) -> None:
            raw = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if body is not None:
                self.send_header("Content-Type", "application/json; odata.metadata=minimal")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _who(self) -> tuple[str, tuple[int, dict[str, str], dict[str, Any]] | None]:
            header = self.headers.get("Authorization", "")
            token = header[7:].strip() if header.lower().startswith("bearer ") else ""
            answer = introspect(oauth, token) if token else {"active": False}
            scopes = str(answer.get("scope") or "").split()
            if answer.get("active") is not True:
                return "", _error(401, "InvalidAuthenticationToken", "Access token has expired or is not yet valid.")
            if not any(resource_of(scope) == "graph.microsoft.com" for scope in scopes):
                return "", _error(401, "InvalidAuthenticationToken", "Invalid audience.")
            if CALENDAR_SCOPE not in scopes:
                return "", _error(403, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")
            return str(answer.get("email") or ""), None

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            base_path = urlsplit(state.url).path
            path = parts.path.removeprefix(base_path)
            state.requests.append((method, path, {k: v for k, v in self.headers.items()}))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if state.fail_next:
                self._send(*state.fail_next.pop(0))
                return
            owner, refusal = self._who()
            if refusal is not None:
                state.refused += 1
                self._send(*refusal)
                return
            utc = 'outlook.timezone="UTC"' in self.headers.get("Prefer", "")
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            mine = state.events.setdefault(owner, {})
            if method == "GET" and path == "/me/calendar":
                self._send(200, {}, {"id": "AAMkcal", "name": state.calendar_name})
            elif method == "GET" and path == "/me/calendarView":
                self._send(*self._view(mine, query, utc))
            elif method == "POST" and path == "/me/events":
                self._send(*self._create(mine, raw))
            elif path.startswith("/me/events/") and method in ("GET", "DELETE"):
                identifier = unquote(path.removeprefix("/me/events/"))
                if identifier not in mine:
                    self._send(*_error(404, "ErrorItemNotFound", "The specified object was not found in the store."))
                elif method == "GET":
                    self._send(200, {}, mine[identifier])
                else:
                    del mine[identifier]
                    self._send(204, {}, None)
            else:
                self._send(*_error(400, "BadRequest", f"Unsupported request {method} {path}."))

        def _view(
            self, mine: dict[str, dict[str, Any]], query: dict[str, str], utc: bool
        ) -> tuple[int, dict[str, str], dict[str, Any]]:
            try:
                low = datetime.fromisoformat(query["startDateTime"].replace("Z", "+00:00"))
                high = datetime.fromisoformat(query["endDateTime"].replace("Z", "+00:00"))
            except (KeyError, ValueError):
                return _error(400, "ErrorInvalidParameter", "startDateTime and endDateTime are required.")
            listed = []
            for event in mine.values():
                repeating = bool(event.get("recurrence"))
                for number, (start, end) in enumerate(_occurrences(event, high)):
                    if start < high and end > low:
                        kept = not utc or event.get("isAllDay")  # all-day: never converted
                        zone = ZoneInfo(event["start"]["timeZone"]) if kept else UTC
                        shown = dict(event)
                        shown.pop("recurrence", None)
                        shown["start"] = {"dateTime": _graph_time(start.astimezone(zone)), "timeZone": str(zone)}
                        shown["end"] = {"dateTime": _graph_time(end.astimezone(zone)), "timeZone": str(zone)}
                        shown["type"] = "occurrence" if repeating else "singleInstance"
                        if repeating:
                            shown["id"] = f"{event['id']}_occ{number}"
                            shown["seriesMasterId"] = event["id"]
                        listed.append((start, shown))
            listed.sort(key=lambda pair: pair[0])
            skip = int(query.get("$skiptoken", "0"))
            size = min(int(query.get("$top", "10")), state.page_size)
            page = [shown for _start, shown in listed[skip : skip + size]]
            body: dict[str, Any] = {"@odata.context": f"{state.url}/$metadata#users('me')/calendarView", "value": page}
            if skip + size < len(listed):
                following = {**query, "$skiptoken": str(skip + size)}
                body["@odata.nextLink"] = f"{state.next_link_base or state.url}/me/calendarView?{urlencode(following)}"
            return 200, {}, body

        def _create(self, mine: dict[str, dict[str, Any]], raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
            try:
                body = json.loads(raw)
                subject = body["subject"]
                start, end = _aware(body["start"]), _aware(body["end"])
                assert isinstance(subject, str) and end > start
            except (ValueError, KeyError, TypeError, AssertionError):
                return _error(400, "ErrorInvalidRequest", "The event is not valid.")
            identifier = "AAMk" + secrets.token_urlsafe(18)
            mine[identifier] = {
                **body,
                "id": identifier,
                "originalStartTimeZone": body["start"]["timeZone"],
                "isAllDay": bool(body.get("isAllDay")),
                "location": body.get("location") or {"displayName": ""},
            }
            return 201, {}, mine[identifier]

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


@contextmanager
def graph_server(oauth: OAuthServer) -> Iterator[Graph]:
    state = Graph()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, oauth))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1.0"
    thread = threading.Thread(target=server.serve_forever, name="graph", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
