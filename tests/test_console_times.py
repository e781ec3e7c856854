"""Times on the console's pages: one format (24-hour, with the zone's abbreviation), in the person's own time zone
(Settings), whatever page shows them, the browser's zone notwithstanding (tests/browser/test_time_zones.py)."""

import re
from datetime import UTC, datetime

import pytest
import time_machine

from accounts.services import update_contact
from conversations.models import Endpoint, Message
from devices.models import DeviceAuthorization
from devices.services import start
from ingestion.hotpath.recording import record_user_message
from reminders.models import Reminder, ReminderStatus
from reminders.services import schedule_reminder

pytestmark = pytest.mark.django_db

# 17:50 UTC on the day of the issue: 12:50 in New York (EST), 18:50 in Paris (CET).
MOMENT = datetime(2026, 11, 25, 17, 50, tzinfo=UTC)
TWELVE_HOUR = re.compile(r"\b\d{1,2}:\d{2}\s?[AP]M\b", re.I)


@pytest.fixture
def in_new_york(client, user):
    update_contact(user, time_zone="America/New_York")
    client.force_login(user)
    return client


def shown_times(page: str) -> list[str]:
    return re.findall(r"<time [^>]*>([^<]*)</time>", page)


def test_the_device_page_says_when_it_was_asked_in_the_person_s_zone_once(in_new_york):
    authorization, _ = start("poke-cli", "203.0.113.9")
    DeviceAuthorization.objects.filter(pk=authorization.pk).update(created_at=MOMENT)

    page = in_new_york.get("/device", {"code": authorization.display_code}).content.decode()

    asked = re.search(r"<dt>Asked</dt><dd>(.*?)</dd>", page, re.S)
    assert asked is not None
    assert re.sub(r"<[^>]+>", "", asked[1]).strip() == "Nov 25, 12:50 EST"  # not "05:50 PM EST UTC"


def test_reminders_next_and_done_are_written_alike_in_the_person_s_zone(in_new_york, user):
    # The clock is the MOMENT's: a reminder is refused for a time that has passed, and these times are fixed.
    with time_machine.travel(MOMENT, tick=False):
        upcoming = schedule_reminder(user, "Stretch", "2026-11-26T15:00")  # read in New York: 20:00 UTC
        done = schedule_reminder(user, "Water the plants", "2026-11-26T09:00")
    Reminder.objects.filter(pk=done.pk).update(status=ReminderStatus.DONE, last_fired_at=MOMENT, next_due_at=None)

    page = in_new_york.get("/reminders/").content.decode()

    assert "Times are in America/New_York" in page
    assert "Nov 26, 15:00 EST" in shown_times(page), upcoming.next_due_at
    assert "Nov 25, 12:50 EST" in shown_times(page)  # the done one's last firing: not in UTC
    assert not TWELVE_HOUR.search(page)


def test_the_thread_and_a_message_s_page_are_in_the_person_s_zone(in_new_york, user):
    message = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Hello")
    Message.objects.filter(pk=message.pk).update(created_at=MOMENT)

    for path in ("/conversation/", f"/conversation/messages/{message.public_id}/"):
        page = in_new_york.get(path).content.decode()
        assert "Nov 25, 12:50 EST" in shown_times(page), path
        assert "UTC" not in " ".join(shown_times(page)), path


def test_a_person_who_never_chose_a_zone_reads_utc(client, user):
    message = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Hello")
    Message.objects.filter(pk=message.pk).update(created_at=MOMENT)
    client.force_login(user)

    assert "Nov 25, 17:50 UTC" in shown_times(client.get("/conversation/").content.decode())
