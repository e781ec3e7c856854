"""Staff see webhook triggers and CLI log-ins in the admin: never a token, digest or signing secret; triggers are
revoked (not deleted) by an action; neither can be added there (a secret must be shown once)."""

import pytest
from django.contrib.auth import get_user_model

from devices import services as devices
from tests.conftest import post
from triggers import services
from triggers.models import WebhookTrigger

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    return client


@pytest.fixture
def signed_trigger(user):
    return services.create_trigger(user, "A deploy fails", "Tell me which commit broke it", signed=True)


def test_the_trigger_list_and_page_show_no_secret(staff_client, signed_trigger):
    trigger, token, secret = signed_trigger
    for path in ("/admin/triggers/webhooktrigger/", f"/admin/triggers/webhooktrigger/{trigger.pk}/change/"):
        page = staff_client.get(path).content.decode()
        assert "A deploy fails" in page and trigger.hint in page
        for hidden in (token, secret, trigger.digest, trigger.signing_salt):
            assert hidden not in page


@pytest.mark.parametrize(
    "lookup", ["digest__startswith", "signing_salt__startswith", "owner__webhook_triggers__digest"]
)
def test_the_trigger_list_cannot_be_filtered_by_a_secret(staff_client, signed_trigger, lookup):
    assert staff_client.get(f"/admin/triggers/webhooktrigger/?{lookup}=a").status_code == 400


def test_staff_revoke_triggers_with_an_action_and_cannot_add_or_delete(staff_client, client, signed_trigger):
    trigger, token, _ = signed_trigger
    response = staff_client.post(
        "/admin/triggers/webhooktrigger/", {"action": "revoke_selected", "_selected_action": [trigger.pk]}
    )
    assert response.status_code == 302
    assert WebhookTrigger.objects.get().is_revoked
    assert post(client, "/api/v1/inbound/webhook", token, {"a": 1}).json()["code"] == "revoked_webhook_trigger"
    assert staff_client.get("/admin/triggers/webhooktrigger/add/").status_code == 403
    assert "delete_selected" not in staff_client.get("/admin/triggers/webhooktrigger/").content.decode()


def test_cli_log_ins_are_listed_read_only_without_the_device_code(staff_client):
    authorization, device_code = devices.start("node", "203.0.113.7")
    page = staff_client.get("/admin/devices/deviceauthorization/").content.decode()
    assert authorization.display_code in page and "203.0.113.7" in page
    assert device_code not in page and authorization.device_code_digest not in page
    detail = staff_client.get(f"/admin/devices/deviceauthorization/{authorization.pk}/change/").content.decode()
    assert authorization.device_code_digest not in detail
    assert staff_client.get("/admin/devices/deviceauthorization/?device_code_digest__startswith=a").status_code == 400
    assert staff_client.get("/admin/devices/deviceauthorization/add/").status_code == 403


def test_a_triggers_delivery_log_is_in_the_admin_read_only(staff_client, signed_trigger):
    trigger, token, _ = signed_trigger
    post(staff_client.__class__(), f"/api/v1/inbound/webhook/{trigger.public_id}", token, {"order": 1})
    post(
        staff_client.__class__(),
        f"/api/v1/inbound/webhook/{trigger.public_id}",
        token[:-1] + ("1" if token.endswith("0") else "0"),
        {"order": 1},
    )

    page = staff_client.get(f"/admin/triggers/webhooktrigger/{trigger.pk}/change/").content.decode()
    link = f"/admin/ingestion/triggerfiring/?trigger__id__exact={trigger.pk}"
    assert link in page.replace("&amp;", "&")
    listing = staff_client.get(link).content.decode()
    assert "invalid_webhook_token" in listing and "JSON object: order" in listing and token not in listing
    assert staff_client.get("/admin/ingestion/triggerfiring/add/").status_code == 403
