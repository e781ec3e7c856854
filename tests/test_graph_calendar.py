"""A Microsoft calendar through Microsoft Graph (connections/oauth/graph_calendar.py), end to end: the person connects
Microsoft on the console's Connections page (the sign-in of tests/test_oauth_mail.py against the Authlib stand-in
for Microsoft's identity platform, which issues one resource's token per request as Microsoft does), and the
assistant's calendar tools list, create and delete events on a Graph stand-in (tests/graph_server.py) that checks
the bearer token's audience and scope. Nothing of ours is mocked."""

import html
import json
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import close_old_connections, connection

from connections import crypto
from connections.graph_recurrence import recurrence
from connections.models import CalendarAccount, GrantKind, GrantStatus, MailAccount, OAuthGrant, OAuthResourceToken
from connections.network import ServiceError
from connections.oauth import mail as oauth_mail
from tests import oauth_mail_servers as peers
from tests.factories import delivery_under_way
from tests.graph_server import CALENDAR_SCOPE, Graph, graph_server
from tests.test_oauth_mail import CONNECTIONS, address, microsoft, page_text, person, run, sign_in

oauth, oauth_dovecot, xoauth2_smtp, caldav_server = (
    peers.oauth,
    peers.oauth_dovecot,
    peers.xoauth2_smtp,
    peers.caldav_server,
)
__all__ = ["address", "microsoft", "person"]  # fixtures, used by name

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

MAILBOX_SCOPES = {"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send"}


@pytest.fixture
def graph(oauth, microsoft) -> Iterator[Graph]:
    with graph_server(oauth) as server:
        microsoft.MICROSOFT_GRAPH_URL = server.url
        yield server


def connect(client, person, capabilities=("mail", "calendar")):
    response = sign_in(client, GrantKind.MICROSOFT, capabilities)
    delivery_under_way(person)
    return response


# Connecting --------------------------------------------------------------------------------------------------------


def test_connecting_microsoft_adds_the_outlook_calendar_with_a_token_for_graph(client, person, graph, oauth, address):
    before = len(oauth.authorize_requests)
    response = connect(client, person)

    assert f"Connected your Microsoft mail and calendar ({address})" in page_text(response)
    asked = set(oauth.authorize_requests[before]["scope"].split())
    assert asked == {"openid", "email", "offline_access", CALENDAR_SCOPE, *MAILBOX_SCOPES}
    calendar = CalendarAccount.objects.get(owner=person)
    assert calendar.server_url == graph.url and calendar.calendar_name == "Calendar"
    assert calendar.calendar_url == graph.url + "/me/calendar" and calendar.password_encrypted == ""
    # One token per resource: the grant's own is the mailbox's, the calendar's is the refresh token redeemed for
    # Graph's scope alone.
    grant = OAuthGrant.objects.get(owner=person)
    mailbox_token = oauth.active(crypto.decrypt(grant.access_token_encrypted))
    assert mailbox_token is not None and CALENDAR_SCOPE not in mailbox_token.scope.split()
    assert CALENDAR_SCOPE not in grant.scope.split()
    stored = OAuthResourceToken.objects.get(grant=grant)
    graph_token = oauth.active(crypto.decrypt(stored.access_token_encrypted))
    assert stored.scope == CALENDAR_SCOPE and graph_token is not None
    assert set(graph_token.scope.split()) == {CALENDAR_SCOPE, "offline_access"}
    assert "default Outlook calendar, reached through Microsoft Graph" in page_text(client.get(CONNECTIONS))


def test_the_calendar_is_added_later_asking_for_its_scope_alone(client, person, graph, oauth, address):
    connect(client, person, ("mail",))
    grant = OAuthGrant.objects.get(owner=person)
    mailbox_token = crypto.decrypt(grant.access_token_encrypted)
    assert "Add calendar (asks Microsoft for access to it)" in page_text(client.get(CONNECTIONS))

    before = len(oauth.authorize_requests)
    response = sign_in(client, GrantKind.MICROSOFT, ("calendar",))

    asked = oauth.authorize_requests[before]
    assert set(asked["scope"].split()) == {"openid", "email", "offline_access", CALENDAR_SCOPE}
    assert asked["login_hint"] == address
    assert f"Connected your Microsoft calendar ({address})" in page_text(response)
    stored = OAuthGrant.objects.get(pk=grant.pk)
    assert crypto.decrypt(stored.access_token_encrypted) == mailbox_token  # the mailbox's token is left alone
    assert CalendarAccount.objects.get(owner=person).oauth_grant_id == grant.pk
    # Both work: mail with the outlook token, the calendar with the Graph one; the rotated refresh token is kept.
    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."
    assert json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-02"}))["events"] == []


def test_a_calendar_declined_at_microsoft_is_not_connected(client, person, graph, oauth, address):
    oauth.withheld = {CALENDAR_SCOPE}  # not consented to: Microsoft will not issue a Graph token
    response = connect(client, person)
    assert f"Connected your Microsoft mail ({address})" in page_text(response)
    assert "You did not allow calendar at Microsoft" in page_text(response)
    assert MailAccount.objects.filter(owner=person).exists() and not CalendarAccount.objects.exists()


def test_a_graph_that_fails_at_connecting_stores_nothing(client, person, graph, oauth, address):
    graph.fail_next.append((503, {}, {"error": {"code": "ServiceNotAvailable", "message": "down"}}))
    response = connect(client, person)
    text = html.unescape(page_text(response))
    assert "Signed in, but Microsoft's calendar service failed (HTTP 503: ServiceNotAvailable — down)" in text
    assert "Nothing was connected" in text
    assert not OAuthGrant.objects.exists() and not OAuthResourceToken.objects.exists()
    assert not MailAccount.objects.exists() and not CalendarAccount.objects.exists()


def test_removing_the_calendar_alone_deletes_its_graph_token_and_keeps_mail(client, person, graph, address):
    from django.urls import reverse

    connect(client, person)
    client.post(reverse("connections:remove-account", args=["calendar"]))
    assert not CalendarAccount.objects.exists() and not OAuthResourceToken.objects.exists()
    assert OAuthGrant.objects.filter(owner=person).exists()
    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."


# Using -------------------------------------------------------------------------------------------------------------


def test_the_assistant_lists_creates_and_deletes_events_on_graph(client, person, graph, address):
    connect(client, person)
    graph.add(address, "Stand-up", "2026-12-01T08:00:00", "2026-12-01T08:15:00", "UTC")
    weekly = {
        "pattern": {"type": "weekly", "interval": 1, "daysOfWeek": ["wednesday"], "firstDayOfWeek": "monday"},
        "range": {"type": "noEnd", "startDate": "2026-11-04", "recurrenceTimeZone": "Europe/Paris"},
    }
    graph.add(address, "Choir", "2026-11-04T19:00:00", "2026-11-04T21:00:00", "Europe/Paris", recurrence=weekly)

    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-09"}))

    assert listed["timeZone"] == "Europe/Paris"
    summaries = [(event["summary"], event["start"]) for event in listed["events"]]
    assert summaries == [
        ("Stand-up", "2026-12-01T09:00"),  # 08:00 UTC in Paris
        ("Choir", "2026-12-02T19:00"),
        ("Choir", "2026-12-09T19:00"),
    ]
    choir = listed["events"][1]
    assert choir["repeats"] is True and choir["id"] == listed["events"][2]["id"]  # the series' id
    sent = [headers for method, path, headers in graph.requests if path == "/me/calendarView"]
    assert sent and all(headers["Prefer"] == 'outlook.timezone="UTC"' for headers in sent)

    created = run(
        person,
        "calendar_create_event",
        {"summary": "Dentist", "start": "2026-12-03T10:00", "end": "2026-12-03T11:00", "location": "Rue X"},
    )
    assert created == "Created the event “Dentist” at Rue X: Thu 3 Dec, 10:00–11:00."
    stored = next(event for event in graph.of(address) if event["subject"] == "Dentist")
    assert stored["start"] == {"dateTime": "2026-12-03T09:00:00", "timeZone": "UTC"}
    assert stored["location"] == {"displayName": "Rue X"}

    told = run(person, "calendar_delete_event", {"id": choir["id"]})
    assert told == "Deleted the event “Choir”, every occurrence of it."
    assert [event["subject"] for event in graph.of(address)] == ["Stand-up", "Dentist"]
    missing = run(person, "calendar_delete_event", {"id": choir["id"]})
    assert "There is no event" in missing and "calendar_list_events gives the ids" in missing


def test_a_repeating_event_is_created_as_graphs_recurrence_in_the_persons_zone(client, person, graph, address):
    connect(client, person)
    created = run(
        person,
        "calendar_create_event",
        {"summary": "Yoga", "start": "2026-12-04T13:00", "end": "2026-12-04T14:00", "rrule": "FREQ=WEEKLY;BYDAY=FR"},
    )
    assert created.startswith("Created the event “Yoga”")
    stored = graph.of(address)[0]
    assert stored["start"] == {"dateTime": "2026-12-04T13:00:00", "timeZone": "Europe/Paris"}
    assert stored["recurrence"]["pattern"] == {
        "interval": 1,
        "type": "weekly",
        "daysOfWeek": ["friday"],
        "firstDayOfWeek": "monday",
    }
    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-31"}))
    assert [event["start"] for event in listed["events"]] == [
        "2026-12-04T13:00",
        "2026-12-11T13:00",
        "2026-12-18T13:00",
        "2026-12-25T13:00",
    ]
    refused = run(
        person,
        "calendar_create_event",
        {"summary": "X", "start": "2026-12-04T13:00", "end": "2026-12-04T14:00", "rrule": "FREQ=HOURLY"},
    )
    assert "Microsoft calendars repeat daily, weekly" in refused and len(graph.of(address)) == 1


def test_an_all_day_event_is_created_and_listed_as_its_dates(client, person, graph, address):
    connect(client, person)
    created = run(person, "calendar_create_event", {"summary": "Holiday", "start": "2026-12-24", "end": "2026-12-25"})
    assert created.startswith("Created the event “Holiday”")
    stored = graph.of(address)[0]
    assert stored["isAllDay"] is True
    assert stored["start"] == {"dateTime": "2026-12-24T00:00:00", "timeZone": "Europe/Paris"}
    assert stored["end"] == {"dateTime": "2026-12-25T00:00:00", "timeZone": "Europe/Paris"}  # the end is exclusive
    # Graph says all-day events at midnight of their own zone, even when asked for UTC: read as dates, not shifted.
    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-20", "end": "2026-12-31"}))
    assert listed["events"] == [
        {"id": stored["id"], "summary": "Holiday", "start": "2026-12-24", "end": "2026-12-25", "allDay": True}
    ]
    assert "unreadable" not in listed


def test_pages_are_followed_and_bounded(client, person, graph, address, monkeypatch):
    connect(client, person)
    graph.page_size = 3
    for day in range(1, 11):
        graph.add(address, f"Event {day}", f"2026-12-{day:02d}T08:00:00", f"2026-12-{day:02d}T09:00:00")
    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-31"}))
    assert [event["summary"] for event in listed["events"]] == [f"Event {day}" for day in range(1, 11)]

    monkeypatch.setattr("connections.oauth.graph_calendar.MAX_PAGES", 2)  # the bound: pages beyond it are not read
    views = len([1 for _method, path, _headers in graph.requests if path == "/me/calendarView"])
    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-31"}))
    assert len(listed["events"]) == 6
    assert len([1 for _method, path, _headers in graph.requests if path == "/me/calendarView"]) == views + 2


def test_a_next_link_to_another_host_is_not_followed(client, person, graph, address):
    connect(client, person)
    graph.page_size = 1
    graph.next_link_base = "http://127.0.0.2:9/v1.0"  # the token must not travel there
    graph.add(address, "A", "2026-12-01T08:00:00", "2026-12-01T09:00:00")
    graph.add(address, "B", "2026-12-02T08:00:00", "2026-12-02T09:00:00")
    told = run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-31"})
    assert "sent a next page elsewhere; it was not followed" in told


def test_an_expired_graph_token_is_refreshed_once_for_graph_alone(client, person, graph, oauth, address):
    connect(client, person)
    grant = OAuthGrant.objects.get(owner=person)
    old = crypto.decrypt(OAuthResourceToken.objects.get(grant=grant).access_token_encrypted)
    mailbox_token = crypto.decrypt(grant.access_token_encrypted)
    oauth.expire_access_tokens()  # Graph answers 401; our copy of the expiry still says it is fresh
    refreshes = oauth.refreshes

    listed = json.loads(run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-02"}))

    assert listed["events"] == [] and graph.refused >= 1
    assert oauth.refreshes == refreshes + 1
    refreshed = oauth.token_requests[-1]
    assert refreshed["grant_type"] == "refresh_token"
    assert set(refreshed["scope"].split()) == {CALENDAR_SCOPE, "offline_access"}  # one resource per request
    fresh = crypto.decrypt(OAuthResourceToken.objects.get(grant=grant).access_token_encrypted)
    assert fresh != old and oauth.active(fresh) is not None
    stored = OAuthGrant.objects.get(pk=grant.pk)
    assert crypto.decrypt(stored.access_token_encrypted) == mailbox_token  # the mailbox's token is another's
    # The refresh token rotated: mail's refresh spends the new one, and works.
    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."
    assert oauth.refreshes == refreshes + 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite's shared in-memory test database refuses a second writer at once ('database table is locked') "
    "instead of waiting: the race needs PostgreSQL (CI's second pass)",
)
def test_a_mail_and_a_calendar_worker_racing_spend_the_rotating_refresh_token_once_each(
    client, person, graph, oauth, address
):
    """One refresh token serves both resources and Microsoft rotates it: a worker renewing the mailbox's token and
    one renewing the calendar's at the same moment take turns on it (the grant's lease), so neither spends a token
    the other already spent and nobody is asked to sign in again."""
    connect(client, person)
    grant = OAuthGrant.objects.get(owner=person)
    account = MailAccount.objects.get(owner=person)
    expired = {"expires_at": grant.created_at}
    OAuthGrant.objects.filter(pk=grant.pk).update(**expired)  # both expired by our clock
    OAuthResourceToken.objects.filter(grant=grant).update(**expired)
    refreshes = oauth.refreshes
    hold = threading.Event()
    oauth.hold_refresh = hold  # the first refresh waits at the server until both workers are in
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def worker(scope: str) -> None:
        try:
            barrier.wait()
            token = oauth_mail.with_token(
                grant.pk, grant.kind, lambda token: oauth_mail.mail_server(account, token).oauth_token, scope=scope
            )
            results[scope or "mail"] = oauth.active(token)
        except Exception as error:  # the assertion below shows it
            results[scope or "mail"] = error
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker, args=(scope,)) for scope in ("", CALENDAR_SCOPE)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    hold.set()
    for thread in threads:
        thread.join(30)
    oauth.hold_refresh = None

    mail_token, calendar_token = results.get("mail"), results.get(CALENDAR_SCOPE)
    assert mail_token is not None and calendar_token is not None, results
    assert CALENDAR_SCOPE in calendar_token.scope.split() and CALENDAR_SCOPE not in mail_token.scope.split()
    assert oauth.refreshes == refreshes + 2
    assert OAuthGrant.objects.get(pk=grant.pk).status == GrantStatus.ACTIVE


@pytest.mark.parametrize(
    ("status", "headers", "code", "said"),
    [
        (403, {}, "ErrorAccessDenied", "Microsoft refused access to the calendar (403: ErrorAccessDenied"),
        (
            429,
            {"Retry-After": "7"},
            "TooManyRequests",
            "limiting requests to the calendar just now (429); try again in 7 seconds",
        ),
        (503, {}, "ServiceNotAvailable", "Microsoft's calendar service failed (HTTP 503: ServiceNotAvailable"),
        (400, {}, "ErrorInvalidRequest", "refused the request (HTTP 400: ErrorInvalidRequest — the reason)"),
    ],
)
def test_graphs_refusals_become_sentences(client, person, graph, status, headers, code, said):
    connect(client, person)
    graph.fail_next.append((status, headers, {"error": {"code": code, "message": "the reason"}}))
    told = run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-02"})
    assert said in told, told


def test_a_short_429_is_waited_out_once_and_the_event_is_created_once(client, person, graph, address):
    """Graph throttles before it does anything: after its Retry-After the same POST creates one event."""
    connect(client, person)
    graph.fail_next.append((429, {"Retry-After": "1"}, {"error": {"code": "TooManyRequests", "message": "slow"}}))

    def posts() -> int:
        return len([1 for method, path, _headers in graph.requests if (method, path) == ("POST", "/me/events")])

    before, started = posts(), time.monotonic()
    event = {"summary": "Dentist", "start": "2026-12-03T10:00", "end": "2026-12-03T11:00"}
    created = run(person, "calendar_create_event", event)

    assert created.startswith("Created the event “Dentist”"), created
    assert time.monotonic() - started >= 1  # the wait Graph asked for
    assert posts() == before + 2
    assert [event["subject"] for event in graph.of(address)] == ["Dentist"]


def test_a_second_429_or_a_long_wait_is_told_not_waited_for(client, person, graph):
    connect(client, person)
    throttled = (429, {"Retry-After": "1"}, {"error": {"code": "TooManyRequests", "message": "slow"}})
    graph.fail_next.extend([throttled, throttled])
    told = run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-02"})
    assert "limiting requests to the calendar just now (429); try again in 1 seconds" in told, told
    assert graph.fail_next == []  # asked twice, no more

    graph.fail_next.append((429, {"Retry-After": "60"}, {"error": {"code": "TooManyRequests", "message": "slow"}}))
    started = time.monotonic()
    told = run(person, "calendar_list_events", {"start": "2026-12-01", "end": "2026-12-02"})
    assert "try again in 60 seconds" in told and time.monotonic() - started < 30, told  # not the 60 s asked


def test_a_token_for_another_resource_is_refused_by_graph(client, person, graph, oauth, address):
    """The stand-in checks the audience as Graph does: the mailbox's token does not open the calendar."""
    connect(client, person)
    grant = OAuthGrant.objects.get(owner=person)
    mailbox_token = crypto.decrypt(grant.access_token_encrypted)
    import requests

    answer = requests.get(graph.url + "/me/calendar", headers={"Authorization": f"Bearer {mailbox_token}"}, timeout=5)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "InvalidAuthenticationToken"


def test_rrules_graph_cannot_hold_are_refused_with_the_forms_it_can():
    from datetime import date

    first = date(2026, 12, 4)
    assert recurrence("FREQ=MONTHLY;BYDAY=-1FR;COUNT=3", first, "UTC") == {
        "pattern": {"interval": 1, "type": "relativeMonthly", "daysOfWeek": ["friday"], "index": "last"},
        "range": {"type": "numbered", "startDate": "2026-12-04", "recurrenceTimeZone": "UTC", "numberOfOccurrences": 3},
    }
    assert recurrence("FREQ=DAILY;INTERVAL=2;UNTIL=20261231T000000Z", first, "UTC")["range"]["endDate"] == "2026-12-31"
    for rule in ("FREQ=HOURLY", "FREQ=WEEKLY;BYDAY=XX", "FREQ=MONTHLY;BYSETPOS=2", "FREQ=DAILY;INTERVAL=0"):
        with pytest.raises(ServiceError, match="Microsoft calendars repeat"):
            recurrence(rule, first, "UTC")
