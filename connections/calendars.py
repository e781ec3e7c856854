"""A person's CalDAV calendar (iCloud, Fastmail, Nextcloud, Radicale, ...) through the `caldav` library; events read
and written with `icalendar`, repeating ones expanded with `recurring_ical_events`.

The HTTP session is caldav's own (niquests), with three changes: the host's name resolves only to the addresses we
checked (connections.network); no proxy, .netrc or DNS service discovery from the environment; and every answer's
body is read through one bound per operation (ops/bounded.py: MAIL_CALENDAR_MAX_ANSWER_BYTES in all, by the
deadline), however it is framed: an answer in endless chunks is cut off at the budget, a trickling one at the
deadline, its connection closed. Each operation runs in a thread of its own, which the bound ends by the deadline.

Times cross this module as aware datetimes; the tool layer turns them into the person's time zone. An event the
calendar holds in another zone is shown in the person's, with its own zone named.
"""

import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dateutil.rrule import rrulestr
from django.conf import settings

from connections.network import ServiceError, one_line, plaintext_allowed, resolve
from connections.threads import StillRunning, in_own_thread
from ops.bounded import Bound, bound_session, current

if TYPE_CHECKING:
    from caldav.davclient import DAVClient

# caldav (with niquests), icalendar and recurring_ical_events take a second or more to import: they are imported
# where they are first used, not by every process that loads the URLs or the assistant.

MAX_EVENTS = 50
MAX_SUMMARY = 255
MAX_LOCATION = 255
MAX_URL_LENGTH = 2000


@dataclass(frozen=True)
class CalendarServer:
    url: str  # what the person typed: the server, the principal or a calendar
    username: str
    password: str = field(repr=False)
    calendar_url: str = ""  # the calendar found when it was added
    # An OAuth 2.0 access token (Google's CalDAV API): sent as "Authorization: Bearer", and ``password`` is empty.
    bearer: str = field(default="", repr=False)


def check_url(url: object) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ServiceError('The CalDAV server URL is required, e.g. "https://caldav.fastmail.com/".')
    url = url.strip()
    if len(url) > MAX_URL_LENGTH or any(not ch.isprintable() or ch.isspace() for ch in url):
        raise ServiceError(f"The CalDAV URL must be one printable line of at most {MAX_URL_LENGTH} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        raise ServiceError("The CalDAV URL is not a valid URL.") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ServiceError('The CalDAV URL must start with https://, e.g. "https://caldav.fastmail.com/".')
    if parts.username is not None or parts.password is not None:
        raise ServiceError("Put the username and password in their own fields, not in the URL.")
    if parts.scheme == "http" and not plaintext_allowed():
        raise ServiceError(
            "The CalDAV URL must use https://: over http:// your password would cross the network unencrypted."
        )
    return url


def _client(server: CalendarServer, seconds: float) -> "DAVClient":
    import niquests
    from caldav.davclient import DAVClient

    url = check_url(server.url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    addresses = resolve(host, parts.port or (443 if parts.scheme == "https" else 80), "CalDAV")
    pinned = ",".join(f"{host}:{ip if ':' not in ip else f'[{ip}]'}" for _family, ip in addresses)
    credentials: dict[str, Any] = (
        {"password": server.bearer, "auth_type": "bearer"}
        if server.bearer
        else {"username": server.username, "password": server.password}
    )
    client = DAVClient(
        url=url,
        timeout=max(seconds, 0.1),  # type: ignore[arg-type]  # caldav hands it to niquests, which takes floats
        enable_rfc6764=False,
        **credentials,
    )
    session = niquests.Session(resolver=f"in-memory://default/?hosts={pinned}")
    session.trust_env = False  # no proxy variables, no .netrc: only the person's credentials, only to this host
    session.max_redirects = 3
    client.session = bound_session(session, _SERVER, max_bytes=settings.MAIL_CALENDAR_MAX_ANSWER_BYTES)
    bound = current()
    if bound is not None:
        bound.close_at_end(session)  # its pools freed when the operation ends (ops/bounded.py)
    return client


_SERVER = "The CalDAV server"


def _bounded[T](work: Callable[[], T], seconds: float, *, oauth: bool = False) -> T:
    """``work()`` under one bound: every answer it reads counts against MAIL_CALENDAR_MAX_ANSWER_BYTES, and the
    connection it reads from is shut when ``seconds`` have passed."""

    def bounded_work() -> T:
        with Bound(_SERVER, max_bytes=settings.MAIL_CALENDAR_MAX_ANSWER_BYTES, seconds=seconds) as bound:
            try:
                return work()
            except BaseException as error:
                exceeded = bound.explain(error)
                if exceeded is not None:
                    raise ServiceError(str(exceeded)) from None
                raise

    try:
        # The bound ends the work by the deadline once an answer's headers are in; the wait's own limit covers a
        # server still sending its headers (each read bounded by the time left).
        return in_own_thread(bounded_work, name="caldav", seconds=max(seconds, 0.0) + 0.2)
    except StillRunning:
        raise ServiceError(f"{_SERVER} did not answer in time.") from None
    except BaseException as error:
        raise _failure(error, oauth=oauth) from None


def _failure(error: BaseException, *, oauth: bool = False) -> BaseException:
    import niquests
    from caldav.lib import error as dav_errors

    if isinstance(error, ServiceError):
        return error
    if isinstance(error, dav_errors.AuthorizationError) and oauth:
        return ServiceError("The CalDAV server refused the sign-in token.", authentication=True)
    if isinstance(error, dav_errors.AuthorizationError):
        return ServiceError(
            "The CalDAV server refused the username or password (use an app password if your provider asks for one).",
            authentication=True,
        )
    if isinstance(error, dav_errors.NotFoundError):
        return ServiceError("The CalDAV server has nothing at this URL (404).")
    if isinstance(error, dav_errors.DAVError):
        return ServiceError(f"The CalDAV server refused the request ({one_line(str(error), 200)}).")
    if isinstance(error, niquests.exceptions.Timeout):
        return ServiceError("The CalDAV server did not answer in time.")
    if isinstance(error, niquests.exceptions.SSLError):
        return ServiceError("TLS with the CalDAV server failed (its certificate could not be verified, or no TLS).")
    if isinstance(error, niquests.exceptions.ConnectionError):
        return ServiceError("Could not connect to the CalDAV server (refused or unreachable).")
    if isinstance(error, niquests.exceptions.RequestException):
        return ServiceError(f"The exchange with the CalDAV server failed ({type(error).__name__}).")
    if isinstance(error, (ValueError, KeyError, AttributeError)):  # caldav reading something that is not CalDAV
        return ServiceError(f"The server did not answer as a CalDAV server ({type(error).__name__}).")
    return error


def check(server: CalendarServer, seconds: float) -> tuple[str, str]:
    """Log in and find the calendar to use: (its URL, its name). ServiceError when the account cannot be used."""

    def work() -> tuple[str, str]:
        from caldav.lib import error as dav_errors

        client = _client(server, seconds)
        if server.calendar_url:  # known already (Google's CalDAV API names it by the address): no discovery
            known = client.calendar(url=server.calendar_url)
            return str(known.url), one_line(str(known.get_display_name() or ""), 100) or "Calendar"
        calendars = client.principal().calendars()
        if not calendars:
            raise ServiceError("The account has no calendar yet; create one with your calendar app first.")
        chosen = calendars[0]
        try:
            name = str(chosen.get_display_name() or "")
        except dav_errors.DAVError:
            name = ""
        return str(chosen.url), one_line(name, 100) or "Calendar"

    return _bounded(work, seconds, oauth=bool(server.bearer))


@dataclass(frozen=True)
class Event:
    uid: str
    summary: str
    start: datetime | date
    end: datetime | date | None
    location: str
    recurring: bool
    zone: str  # the zone the calendar holds its start in ("" for floating times and all-day events)


def _calendar(server: CalendarServer, seconds: float) -> Any:
    return _client(server, seconds).calendar(url=server.calendar_url or server.url)


def list_events(server: CalendarServer, start: datetime, end: datetime, seconds: float) -> tuple[list[Event], int]:
    """Events overlapping [start, end), repeating ones expanded, sorted; and how many stored objects could not be
    read (malformed iCalendar is skipped, not fatal)."""

    def work() -> tuple[list[Event], int]:
        import icalendar
        import recurring_ical_events

        objects = _calendar(server, seconds).search(start=start, end=end, event=True, expand=False)
        events: list[Event] = []
        unreadable = 0
        for item in objects:
            try:
                parsed = icalendar.Calendar.from_ical(item.data)
                occurrences = recurring_ical_events.of(parsed).between(start, end)
                repeating = any("RRULE" in component or "RDATE" in component for component in parsed.walk("VEVENT"))
                events.extend(_event(component, repeating) for component in occurrences[: MAX_EVENTS * 2])
            except Exception:  # the server's data, whatever it holds: one bad event must not hide the others
                unreadable += 1
        events.sort(key=lambda event: _sort_key(event.start))
        return events[:MAX_EVENTS], unreadable

    return _bounded(work, seconds, oauth=bool(server.bearer))


def _sort_key(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def _event(component: Any, repeating: bool) -> Event:
    start = component.decoded("DTSTART")
    end = component.decoded("DTEND") if "DTEND" in component else None
    zone = ""
    if isinstance(start, datetime) and start.tzinfo is not None:
        zone = str(getattr(start.tzinfo, "key", "") or start.tzinfo.tzname(start) or "")
    return Event(
        uid=str(component.get("UID", "")),
        summary=one_line(str(component.get("SUMMARY", "")), MAX_SUMMARY),
        start=start,
        end=end,
        location=one_line(str(component.get("LOCATION", "")), MAX_LOCATION),
        recurring=repeating,
        zone=zone,
    )


def check_rrule(rule: str, start: datetime | date) -> str:
    import icalendar

    rule = rule.strip().removeprefix("RRULE:")
    if len(rule) > 500 or "\n" in rule:
        raise ServiceError("rrule must be one RFC 5545 RRULE line, e.g. FREQ=WEEKLY;BYDAY=MO.")
    try:
        rrulestr(rule, dtstart=start)
        icalendar.vRecur.from_ical(rule)
    except (ValueError, TypeError):
        raise ServiceError(f"rrule is not a valid RFC 5545 RRULE: {one_line(rule, 100)}") from None
    return rule


@dataclass(frozen=True)
class NewEvent:
    """An event to create, as calendar_create_event checked it (for CalDAV here, for Microsoft Graph in
    connections/oauth/graph_calendar.py)."""

    summary: str
    start: datetime | date  # both times, or both dates (all day; the end date is exclusive)
    end: datetime | date
    location: str
    rrule: str  # checked by check_rrule; "" for a one-off event
    zone: tzinfo  # the person's


def create_event(server: CalendarServer, new: NewEvent, seconds: float) -> str:
    """Store a new event; its UID (the id the other tools take)."""
    import icalendar

    event = icalendar.Event()
    uid = f"{uuid.uuid4()}@poke"
    event.add("UID", uid)
    event.add("DTSTAMP", datetime.now(UTC))
    event.add("SUMMARY", new.summary)
    event.add("DTSTART", new.start)
    event.add("DTEND", new.end)
    if new.location:
        event.add("LOCATION", new.location)
    if new.rrule:
        event.add("RRULE", icalendar.vRecur.from_ical(new.rrule))
    calendar = icalendar.Calendar()
    calendar.add("PRODID", "-//Poke ingestion//assistant//EN")
    calendar.add("VERSION", "2.0")
    calendar.add_component(event)
    calendar.add_missing_timezones()
    ical = calendar.to_ical().decode()

    def work() -> str:
        _calendar(server, seconds).add_event(ical, no_overwrite=True)
        return uid

    return _bounded(work, seconds, oauth=bool(server.bearer))


def delete_event(server: CalendarServer, uid: str, seconds: float) -> str:
    """Delete the event with this UID (every occurrence of a repeating one); its summary."""

    def work() -> str:
        import icalendar
        from caldav.lib import error as dav_errors

        try:
            found = _calendar(server, seconds).get_event_by_uid(uid)
        except dav_errors.NotFoundError:
            raise ServiceError(
                f"There is no event {uid!r} in the calendar; calendar_list_events gives the ids."
            ) from None
        summary = ""
        with suppress(Exception):  # deleting does not need the summary
            summary = str(icalendar.Calendar.from_ical(found.data).walk("VEVENT")[0].get("SUMMARY", ""))
        found.delete()
        return one_line(summary, MAX_SUMMARY)

    return _bounded(work, seconds, oauth=bool(server.bearer))
