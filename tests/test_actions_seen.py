"""What the assistant did is seen by the person: under the reply on the thread page (collapsed), in the receipt for a
key allowed to read replies (not for others), in the admin for staff; and the Connections and Reminders pages."""

import pytest

from assistant.models import Action
from connections.models import Connection
from keys.models import Generation
from reminders import services as reminders
from reminders.models import Reminder, ReminderStatus
from tests.factories import UserFactory, make_key
from tests.mcp_server import running_mcp_server
from tests.test_assistant_tools import call, completion

pytestmark = pytest.mark.django_db


@pytest.fixture
def acted(send, llm, user):
    """A message whose reply came after the assistant scheduled a reminder; sent with a key that may read replies."""
    _, key = make_key(user, "reader", Generation.V2, may_read_replies=True)
    llm.answer(
        200, completion(tool_calls=[call("schedule_reminder", {"text": "Call Sam", "when": "2099-01-05T15:00"})])
    )
    llm.answer(200, completion("I will remind you to call Sam."))
    message_id = send(key, {"message": "Remind me to call Sam"}).json()["id"]
    return key, message_id


def test_the_thread_shows_the_actions_under_the_reply_collapsed(client, user, acted):
    client.force_login(user)
    page = client.get("/conversation/").content.decode()

    assert '<details class="disclosure actions-taken">' in page  # collapsed until opened
    assert "What the assistant did (1 action)" in page
    assert "schedule_reminder" in page
    assert "Call Sam" in page and "Scheduled the reminder “Call Sam”: " in page


def test_the_receipt_carries_the_actions_for_a_key_that_may_read_replies(client, acted):
    key, message_id = acted
    receipt = client.get(f"/api/v1/inbound/messages/{message_id}", headers={"Authorization": f"Bearer {key}"}).json()

    [action] = receipt["actions"]
    assert action["tool"] == "schedule_reminder"
    assert action["arguments"] == {"text": "Call Sam", "when": "2099-01-05T15:00"}
    assert action["result"].startswith("Scheduled the reminder “Call Sam”: ")
    assert action["isError"] is False and action["startedAt"] and action["finishedAt"]


def test_the_receipt_has_no_actions_for_a_key_without_the_permission(client, send, llm, v2):
    llm.answer(200, completion(tool_calls=[call("list_reminders", {})]))
    llm.answer(200, completion("None."))
    message_id = send(v2[1], {"message": "What reminders do I have?"}).json()["id"]

    receipt = client.get(f"/api/v1/inbound/messages/{message_id}", headers={"Authorization": f"Bearer {v2[1]}"})

    assert "actions" not in receipt.json()
    assert Action.objects.count() == 1


def test_staff_see_actions_in_the_admin(client, acted):
    admin = UserFactory(email="staff@example.com", is_staff=True, is_superuser=True)
    client.force_login(admin)
    listing = client.get("/admin/assistant/action/")
    assert listing.status_code == 200
    assert "schedule_reminder" in listing.content.decode()
    detail = client.get(f"/admin/assistant/action/{Action.objects.get().pk}/change/")
    assert "Call Sam" in detail.content.decode()


def test_the_connections_page_adds_lists_syncs_and_removes(client, user):
    client.force_login(user)
    with running_mcp_server() as server:
        added = client.post("/connections/", {"name": "Tracker", "server_url": server.url, "api_key": "s3cret-key"})
        assert added.status_code == 302
        page = client.get("/connections/").content.decode()
        connection = Connection.objects.get()
        assert "Tracker" in page and server.url in page and "5 tools" in page and "create_issue" in page
        assert "s3cret-key" not in page and "key set" in page
        assert client.post(f"/connections/{connection.public_id}/sync/").status_code == 302
    confirm = client.get(f"/connections/{connection.public_id}/remove/")
    assert "Remove “Tracker”?" in confirm.content.decode()
    assert client.post(f"/connections/{connection.public_id}/remove/").status_code == 302
    assert not Connection.objects.exists()


def test_the_connections_page_says_why_a_server_cannot_be_added(client, user):
    client.force_login(user)
    response = client.post("/connections/", {"name": "Bad", "server_url": "ftp://example.com/mcp"})
    assert response.status_code == 400
    assert "http:// or https://" in response.content.decode()
    assert not Connection.objects.exists()


def test_someone_elses_connection_and_reminder_are_404(client, user):
    other = UserFactory(email="kim@example.com")
    with running_mcp_server() as server:
        from connections.services import add_connection

        theirs = add_connection(other, "Theirs", server.url)
    reminder = reminders.schedule_reminder(other, "Their reminder", "2099-01-01T10:00")
    client.force_login(user)
    assert client.get(f"/connections/{theirs.public_id}/remove/").status_code == 404
    assert client.post(f"/connections/{theirs.public_id}/remove/").status_code == 404
    assert client.post(f"/reminders/{reminder.public_id}/cancel/").status_code == 302
    reminder.refresh_from_db()
    assert reminder.status == ReminderStatus.SCHEDULED
    assert "Their reminder" not in client.get("/reminders/").content.decode()


def test_the_reminders_page_lists_and_cancels(client, user):
    user.profile.time_zone = "Europe/Paris"
    user.profile.save()
    reminder = reminders.schedule_reminder(user, "Water the plants", "2099-01-01T09:00", "FREQ=WEEKLY;BYDAY=MO")
    client.force_login(user)

    page = client.get("/reminders/").content.decode()
    assert "Water the plants" in page and "every Monday at 09:00" in page and "Europe/Paris" in page
    assert "FREQ=" not in page

    assert client.post(f"/reminders/{reminder.public_id}/cancel/").status_code == 302
    assert Reminder.objects.get().status == ReminderStatus.CANCELLED
    assert "No reminders scheduled" in client.get("/reminders/").content.decode()


def test_the_settings_page_sets_the_time_zone(client, user):
    client.force_login(user)
    response = client.post(
        "/settings/", {"phone_number": "+14155551234", "channel": "sms", "time_zone": "America/New_York"}
    )
    assert response.status_code == 302
    user.profile.refresh_from_db()
    assert user.profile.time_zone == "America/New_York"
    refused = client.post("/settings/", {"phone_number": "+14155551234", "channel": "sms", "time_zone": "Mars/Base"})
    assert "not a time zone name" in refused.content.decode()


def test_reminder_times_are_shown_in_the_persons_time_zone(client, user):
    user.profile.time_zone = "Asia/Tokyo"
    user.profile.save()
    reminders.schedule_reminder(user, "Call home", "2099-03-01T21:15")
    client.force_login(user)
    page = client.get("/reminders/").content.decode()
    assert "Mar 1, 21:15 JST" in page  # 12:15 UTC, shown as the person asked for it, in their zone
