"""Staff inspect keys (never their secrets), threads and deliveries in the admin."""

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
    post(client, CURRENT, plaintext, {"message": "Backup finished: 42 GB"})

    deliveries = staff_client.get("/admin/conversations/delivery/?q=nightly&status__exact=queued").content.decode()
    assert "queued" in deliveries.lower()
    assert "0 deliveries" not in deliveries
    thread = staff_client.get(f"/admin/conversations/conversation/{user.conversation.pk}/change/").content.decode()
    assert "Backup finished: 42 GB" in thread
