"""A Microsoft 365 or Outlook.com calendar through Microsoft Graph's REST API (Microsoft calendars have no CalDAV
interface): the person's default calendar, with the same operations as connections/calendars.py and the same
answers, so the calendar tools need not know which one they talk to.

- list: ``GET /me/calendarView`` (repeating events expanded by Graph into occurrences; an occurrence's id is its
  series', so deleting it deletes every occurrence, as with CalDAV), times asked in UTC (``Prefer:
  outlook.timezone="UTC"``), followed over ``@odata.nextLink`` for at most MAX_PAGES pages and only on the same API;
- create: ``POST /me/events`` (a repeating one with its RRULE as Graph's patterned recurrence,
  connections/graph_recurrence.py);
- delete: ``GET`` then ``DELETE /me/events/{id}``.

Every exchange goes through connections/oauth/http.py (a checked address, no redirects, the answer read within the
time left and within what is left of MAIL_CALENDAR_MAX_ANSWER_BYTES for the whole operation). Graph's refusals
become sentences: 401 is ``authentication`` (the caller refreshes the token once), 403, 404, 429 with its
Retry-After (a short one waited out once first), 5xx. The access token is the grant's token for Graph
(connections/oauth/tokens.py, ``scope=``).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings

from connections.calendars import MAX_EVENTS, MAX_LOCATION, MAX_SUMMARY, CalendarServer, Event, NewEvent
from connections.graph_recurrence import recurrence
from connections.network import ServiceError, one_line
from connections.oauth.http import Answer, OAuthHttpError, exchange

API = "Microsoft Graph API"
MAX_PAGES = 5
PAGE_SIZE = 50
MAX_RETRY_AFTER = 3600
# A 429 asking for at most this many seconds is waited out inside the tool call (once); a longer one is told.
WAIT_WITHIN_CALL = 5
_SELECT = "id,subject,start,end,location,isAllDay,type,seriesMasterId,originalStartTimeZone"


@dataclass
class _Budget:
    """What one operation may still spend: time until ``deadline`` and bytes."""

    deadline: float
    bytes_left: int

    @classmethod
    def of(cls, seconds: float) -> "_Budget":
        return cls(time.monotonic() + seconds, int(settings.MAIL_CALENDAR_MAX_ANSWER_BYTES))

    def seconds(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise ServiceError(f"The {API} did not answer in time.")
        return left


def _base(server: CalendarServer) -> str:
    return server.url.rstrip("/")


def _request(
    server: CalendarServer, budget: _Budget, method: str, url: str, body: dict[str, Any] | None = None
) -> Answer:
    """One exchange; a 429 whose wait is short and fits in what is left of the operation's time is waited out and
    the request sent once more (Graph refuses a throttled request before doing anything, so a repeated POST creates
    one event); a longer wait, or a second 429, becomes the sentence that says how long."""
    try:
        return _exchange(server, budget, method, url, body)
    except Throttled as throttled:
        wait = throttled.wait if throttled.wait is not None else 1
        if wait > WAIT_WITHIN_CALL or budget.deadline - time.monotonic() < wait + 1:
            raise
        time.sleep(wait)
        return _exchange(server, budget, method, url, body)


def _exchange(
    server: CalendarServer, budget: _Budget, method: str, url: str, body: dict[str, Any] | None = None
) -> Answer:
    if budget.bytes_left <= 0:
        raise ServiceError(f"The {API} answered more than the most this server reads for one operation.")
    headers = {"Authorization": f"Bearer {server.bearer}", "Prefer": 'outlook.timezone="UTC"'}
    try:
        answer = exchange(
            method,
            url,
            API,
            body=body,
            headers=headers,
            seconds=budget.seconds(),
            max_bytes=budget.bytes_left,
        )
    except OAuthHttpError as failed:
        raise ServiceError(str(failed)) from None
    budget.bytes_left -= len(answer.body)
    if answer.status >= 400:
        raise _refusal(answer)
    return answer


class NotFound(ServiceError):
    """Graph answered 404: no such event (or calendar)."""


class Throttled(ServiceError):
    """Graph answered 429; ``wait``: the seconds its Retry-After asked for, if it said."""

    def __init__(self, message: str, wait: int | None) -> None:
        super().__init__(message)
        self.wait = wait


def _refusal(answer: Answer) -> ServiceError:
    """Graph's error answer (``{"error": {"code", "message"}}``) as a sentence for the person and the model."""
    found = (answer.json_object() or {}).get("error")
    detail = ""
    if isinstance(found, dict):
        parts = [one_line(str(found.get(key) or ""), 200) for key in ("code", "message")]
        detail = " — ".join(part for part in parts if part)
    said = f": {detail}" if detail else ""
    if answer.status == 401:
        return ServiceError(f"The {API} refused the sign-in token (401{said}).", authentication=True)
    if answer.status == 403:
        return ServiceError(
            f"Microsoft refused access to the calendar (403{said}); sign in again with Microsoft from Connections "
            "and allow the calendar."
        )
    if answer.status == 404:
        return NotFound(f"The calendar has no such item (404{said}).")
    if answer.status == 429:
        wait = _retry_after(answer.headers.get("Retry-After"))
        when = f"in {wait} seconds" if wait is not None else "shortly"
        return Throttled(f"Microsoft is limiting requests to the calendar just now (429); try again {when}.", wait)
    if answer.status >= 500:
        return ServiceError(f"Microsoft's calendar service failed (HTTP {answer.status}{said}); try again shortly.")
    return ServiceError(f"The {API} refused the request (HTTP {answer.status}{said}).")


def _retry_after(value: str | None) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(int(value.strip()), MAX_RETRY_AFTER)


def _json(answer: Answer) -> dict[str, Any]:
    found = answer.json_object()
    if found is None:
        raise ServiceError(f"The {API} did not answer with JSON.")
    return found


def _run[T](work: Callable[[], T]) -> T:
    try:
        return work()
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # JSON of a shape Graph does not send
        raise ServiceError(f"The {API} answered in an unexpected form ({type(error).__name__}).") from None


def check(server: CalendarServer, seconds: float) -> tuple[str, str]:
    """The person's default calendar: (its URL, its name). ServiceError when it cannot be reached with the token."""

    def work() -> tuple[str, str]:
        url = f"{_base(server)}/me/calendar"
        found = _json(_request(server, _Budget.of(seconds), "GET", url + "?$select=id,name"))
        return url, one_line(str(found.get("name") or ""), 100) or "Calendar"

    return _run(work)


# Listing ---------------------------------------------------------------------------------------------------------


def list_events(server: CalendarServer, start: datetime, end: datetime, seconds: float) -> tuple[list[Event], int]:
    """Events overlapping [start, end), occurrences of repeating ones included, sorted; and how many could not be
    read."""

    def work() -> tuple[list[Event], int]:
        budget = _Budget.of(seconds)
        query = {
            "startDateTime": _utc_text(start),
            "endDateTime": _utc_text(end),
            "$select": _SELECT,
            "$orderby": "start/dateTime",
            "$top": str(PAGE_SIZE),
        }
        url = f"{_base(server)}/me/calendarView?{urlencode(query)}"
        events: list[Event] = []
        unreadable = 0
        for _page in range(MAX_PAGES):
            found = _json(_request(server, budget, "GET", url))
            items = found.get("value")
            if not isinstance(items, list):
                raise ServiceError(f"The {API} answered without a list of events.")
            for item in items:
                try:
                    events.append(_event(item))
                except (ValueError, KeyError, TypeError, AttributeError):
                    unreadable += 1
            following = found.get("@odata.nextLink")
            if len(events) >= MAX_EVENTS or not isinstance(following, str) or not following:
                break
            url = _same_api(server, following)
        events.sort(key=lambda event: _sort_key(event.start))
        return events[:MAX_EVENTS], unreadable

    return _run(work)


def _same_api(server: CalendarServer, url: str) -> str:
    """A next page's link, followed only when it is on the same API: the token goes nowhere else."""
    if not url.startswith(_base(server) + "/"):
        raise ServiceError(f"The {API} sent a next page elsewhere; it was not followed.")
    return url


def _utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sort_key(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def _when(value: dict[str, Any]) -> datetime:
    """A dateTimeTimeZone Graph sent in UTC (we asked for it): ``2026-12-01T08:00:00.0000000``."""
    text = str(value["dateTime"])
    if str(value.get("timeZone") or "UTC") != "UTC":
        raise ValueError("not in UTC")
    head, _dot, fraction = text.partition(".")
    moment = datetime.fromisoformat(head)
    if fraction:
        moment += timedelta(microseconds=int(fraction[:6].ljust(6, "0")))
    return moment.replace(tzinfo=UTC)


def _day(value: dict[str, Any]) -> date:
    """An all-day event's date: Graph does not convert those to the zone asked for (they are whole days, said at
    midnight of the zone they were made in), so the date is read as it stands."""
    return date.fromisoformat(str(value["dateTime"])[:10])


def _event(item: dict[str, Any]) -> Event:
    all_day = item.get("isAllDay") is True
    start: datetime | date
    end: datetime | date
    if all_day:
        start, end = _day(item["start"]), _day(item["end"])
    else:
        start, end = _when(item["start"]), _when(item["end"])
    kind = item.get("type")
    repeating = kind in ("occurrence", "exception", "seriesMaster")
    identifier = item.get("seriesMasterId") if kind in ("occurrence", "exception") else item.get("id")
    if not isinstance(identifier, str) or not identifier:
        raise ValueError("no id")
    location = item.get("location")
    zone = item.get("originalStartTimeZone")
    return Event(
        uid=identifier,
        summary=one_line(str(item.get("subject") or ""), MAX_SUMMARY),
        start=start,
        end=end,
        location=one_line(str(location.get("displayName") or ""), MAX_LOCATION) if isinstance(location, dict) else "",
        recurring=repeating,
        # The zone the organiser set it in, when it is a name we can show (Graph may say a Windows name, or tzone://).
        zone="" if all_day or not isinstance(zone, str) or zone.startswith("tzone://") else one_line(zone, 60),
    )


# Creating and deleting -------------------------------------------------------------------------------------------


def create_event(server: CalendarServer, new: NewEvent, seconds: float) -> str:
    """Store a new event in the default calendar; its id."""
    summary, start, end, location, rrule, zone = new.summary, new.start, new.end, new.location, new.rrule, new.zone
    zone_name = str(getattr(zone, "key", "") or "UTC")
    body: dict[str, Any] = {"subject": summary, "start": {}, "end": {}}
    if isinstance(start, datetime) and isinstance(end, datetime):
        # A one-off time goes in UTC (every Graph calendar takes it); a repeating one in the person's zone, so it
        # keeps its local hour across daylight saving time.
        if rrule:
            body["start"] = {"dateTime": _local_text(start, zone), "timeZone": zone_name}
            body["end"] = {"dateTime": _local_text(end, zone), "timeZone": zone_name}
        else:
            body["start"] = {"dateTime": start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"), "timeZone": "UTC"}
            body["end"] = {"dateTime": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"), "timeZone": "UTC"}
    else:
        body["isAllDay"] = True  # Graph wants midnight to midnight in the event's zone
        body["start"] = {"dateTime": f"{start.isoformat()[:10]}T00:00:00", "timeZone": zone_name}
        body["end"] = {"dateTime": f"{end.isoformat()[:10]}T00:00:00", "timeZone": zone_name}
    if location:
        body["location"] = {"displayName": location}
    if rrule:
        first = start.astimezone(zone).date() if isinstance(start, datetime) else start
        body["recurrence"] = recurrence(rrule, first, zone_name)

    def work() -> str:
        found = _json(_request(server, _Budget.of(seconds), "POST", f"{_base(server)}/me/events", body))
        identifier = found.get("id")
        if not isinstance(identifier, str) or not identifier:
            raise ServiceError(f"The {API} did not say the new event's id.")
        return identifier

    return _run(work)


def _local_text(value: datetime, zone: tzinfo) -> str:
    return value.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S")


def delete_event(server: CalendarServer, uid: str, seconds: float) -> str:
    """Delete the event with this id (a series with every occurrence); its summary."""

    def work() -> str:
        budget = _Budget.of(seconds)
        url = f"{_base(server)}/me/events/{quote(uid, safe='')}"
        try:
            found = _json(_request(server, budget, "GET", url + "?$select=subject"))
        except NotFound:
            missing = f"There is no event {uid!r} in the calendar; calendar_list_events gives the ids."
            raise ServiceError(missing) from None
        _request(server, budget, "DELETE", url)
        return one_line(str(found.get("subject") or ""), MAX_SUMMARY)

    return _run(work)
