"""Staff inspect keys (never their secrets), threads and deliveries in the admin."""

import re

import pytest
from django.contrib.auth import get_user_model

from keys.models import ApiKey
from tests.conftest import CURRENT, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    return client


def test_the_key_list_shows_hints_never_digests(staff_client, v2):
    key, plaintext = v2
    page = staff_client.get("/admin/keys/apikey/").content.decode()

    assert key.hint in page
    assert key.digest not in page
    assert plaintext not in page


def test_a_key_page_hides_the_digest(staff_client, v2):
    page = staff_client.get(f"/admin/keys/apikey/{v2[0].pk}/change/").content.decode()
    assert v2[0].digest not in page


@pytest.mark.parametrize("lookup", ["digest__startswith", "digest", "digest__gte", "owner__api_keys__digest"])
def test_the_key_list_cannot_be_filtered_by_digest(staff_client, v2, lookup):
    # Counting the rows that match a guessed prefix would read the digest out one character at a time.
    response = staff_client.get(f"/admin/keys/apikey/?{lookup}={v2[0].digest[:2]}")
    assert response.status_code == 400
    assert v2[0].hint not in response.content.decode()


def test_staff_revoke_keys_with_an_action(staff_client, client, v2):
    response = staff_client.post(
        "/admin/keys/apikey/", {"action": "revoke_selected", "_selected_action": [v2[0].pk]}, follow=True
    )
    assert "Revoked 1 key" in response.content.decode()
    assert ApiKey.objects.get().is_revoked


def test_a_revoked_key_is_read_only(staff_client, v2):
    from keys.services import revoke_key

    revoke_key(v2[0])
    response = staff_client.post(f"/admin/keys/apikey/{v2[0].pk}/change/", {"name": "renamed"})
    assert response.status_code == 403
    assert ApiKey.objects.get().name == v2[0].name


def test_keys_cannot_be_added_in_the_admin(staff_client):
    assert staff_client.get("/admin/keys/apikey/add/").status_code == 403


def test_deliveries_and_threads_are_listed_and_searchable(client, staff_client, user):
    _, plaintext = make_key(user, "nightly backup")
    _, other = make_key(user, "deploy hook")
    post(client, CURRENT, plaintext, {"message": "Backup finished: 42 GB"})
    post(client, CURRENT, other, {"message": "Deploy finished"})

    def found(query: str) -> list[str]:
        """The rows of the result table (not the filter sidebar, which names every status whatever is listed)."""
        page = staff_client.get(f"/admin/conversations/delivery/?{query}").content.decode()
        table = re.search(r'<table id="result_list">.*?</table>', page, re.S)
        rows = re.findall(r"<tr[^>]*>.*?</tr>", table[0], re.S)[1:] if table else []  # after the header row
        return [re.sub(r"<[^>]+>|\s+", " ", row) for row in rows]

    from conversations.models import Message

    backup = Message.objects.get(text="Backup finished: 42 GB")
    (row,) = found(f"q={backup.public_id}&status__exact=queued")
    assert "nightly backup" in row and "Queued" in row
    assert found(f"q={backup.public_id}&status__exact=failed") == []
    assert found("q=nightly") == []  # an id, not words: a search for words would read every delivery
    thread = staff_client.get(f"/admin/conversations/conversation/{user.conversation.pk}/change/").content.decode()
    assert "Backup finished: 42 GB" in thread


def test_the_delivery_list_shows_the_lifecycle_and_filters_by_status_and_key(staff_client, client, user):
    from conversations.models import Delivery, DeliveryStatus

    nightly, nightly_plaintext = make_key(user, "nightly backup")
    _, deploy_plaintext = make_key(user, "deploy hook")
    post(client, CURRENT, nightly_plaintext, {"message": "Backup finished"})
    post(client, CURRENT, deploy_plaintext, {"message": "Deploy finished"})
    Delivery.objects.filter(api_key=nightly).update(
        status=DeliveryStatus.FAILED, attempts=5, last_error="The assistant webhook answered HTTP 503."
    )

    page = staff_client.get("/admin/conversations/delivery/").content.decode()
    for column in ["Status", "Attempts", "Backend", "Started at", "Finished at", "Next attempt at", "Last error"]:
        assert column in page
    assert "answered HTTP 503" in page

    def listed(query: str) -> list[str]:
        changelist = staff_client.get(f"/admin/conversations/delivery/?{query}").context["cl"]
        return [delivery.message.text for delivery in changelist.result_list]

    assert listed("status__exact=failed") == ["Backup finished"]
    assert listed("status__exact=queued") == ["Deploy finished"]
    assert listed(f"api_key={nightly.pk}") == ["Backup finished"]
    key_page = staff_client.get(f"/admin/keys/apikey/{nightly.pk}/change/").content.decode()
    assert f"/admin/conversations/delivery/?api_key={nightly.pk}" in key_page  # its deliveries, one click away


def test_staff_retry_failed_deliveries_with_an_action(staff_client, client, v2, django_capture_on_commit_callbacks):
    from conversations.models import Delivery, DeliveryStatus

    post(client, CURRENT, v2[1], {"message": "one"})
    post(client, CURRENT, v2[1], {"message": "two"})
    failed, delivered = Delivery.objects.order_by("pk")
    Delivery.objects.filter(pk=failed.pk).update(status=DeliveryStatus.FAILED, attempts=5)
    Delivery.objects.filter(pk=delivered.pk).update(status=DeliveryStatus.DELIVERED, attempts=1)

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            "/admin/conversations/delivery/",
            {"action": "retry_selected", "_selected_action": [failed.pk, delivered.pk]},
            follow=True,
        )

    page = response.content.decode()
    assert "Queued 1 delivery for a fresh round of attempts." in page
    assert "Skipped 1 delivery already delivered or being attempted right now." in page
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == (DeliveryStatus.DELIVERED, 1)  # the local assistant took it


def test_the_delivery_list_shows_the_backlog_the_attempts_in_flight_and_the_oldest_queued_age(
    staff_client, client, user
):
    from datetime import timedelta

    from django.utils import timezone

    from conversations.models import Delivery, DeliveryStatus

    _, plaintext = make_key(user)
    for text in ["one", "two", "three"]:
        post(client, CURRENT, plaintext, {"message": text})
    one, two, _ = Delivery.objects.order_by("created_at")
    Delivery.objects.filter(pk=one.pk).update(status=DeliveryStatus.PROCESSING, started_at=timezone.now())
    Delivery.objects.filter(pk=two.pk).update(created_at=timezone.now() - timedelta(minutes=10))

    page = staff_client.get("/admin/conversations/delivery/").content.decode()

    assert re.search(r"Queued: 2 · being attempted: 1 · oldest queued accepted 60[01] s ago", page)
    assert re.search(r"accepted→delivered \(last 5 min, 0\)|accepted→delivered", page) is None  # none delivered

    Delivery.objects.filter(pk=one.pk).update(
        status=DeliveryStatus.DELIVERED, created_at=timezone.now() - timedelta(seconds=3), finished_at=timezone.now()
    )
    page = staff_client.get("/admin/conversations/delivery/").content.decode()
    assert re.search(r"accepted→delivered \(last 5 min, 1\): median 3\.\d\d s, p99 3\.\d\d s", page)


@pytest.mark.parametrize("path", ["/admin/conversations/delivery/", "/admin/reminders/reminder/"])
def test_a_nul_in_a_list_filter_is_a_bad_request_not_a_server_error(staff_client, path):
    assert staff_client.get(path, {"status__exact": "\x00"}).status_code == 400
    assert staff_client.get(path, {"status__exact": "queued"}).status_code == 200
