"""A key's life cycle (docs/howto/keys-and-scopes.md#key-life-cycle): expiry, roll with an overlap, rename, "Send
test message", and the audit log of each change. Windows are tested on a fixed clock (time-machine), never by
sleeping."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from accounts.models import AuditEvent, AuditKind
from conversations.models import Message
from keys.models import ApiKey
from keys.scopes import Scope
from keys.services import RollRefused, create_key, revoke_key, roll_key
from tests.conftest import CURRENT, post
from tests.console import DEFAULT_SCOPES, form_nonce, secret_on
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def send(client, plaintext, text="hi"):
    return post(client, CURRENT, plaintext, {"message": text})


def code_of(response) -> str:
    return response.json().get("code", "") if response.status_code != 200 else ""


def kinds(owner) -> list[str]:
    return list(AuditEvent.objects.filter(account=owner).order_by("at", "id").values_list("kind", flat=True))


def test_a_key_works_until_its_expiry_and_is_then_refused(client):
    with time_machine.travel(T0, tick=False):
        _, plaintext = create_key(UserFactory(), "nightly", expires_at=T0 + timedelta(hours=1))
    with time_machine.travel(T0 + timedelta(minutes=59, seconds=59), tick=False):
        assert send(client, plaintext).status_code == 200
        assert send(client, plaintext).status_code == 200  # the remembered key, no lookup
    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        refused = send(client, plaintext)
    assert (refused.status_code, code_of(refused)) == (401, "expired_api_key")
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert Message.objects.count() == 2
    with time_machine.travel(T0 + timedelta(hours=2), tick=False):
        assert code_of(client.get("/api/v1/user/profile", headers={"Authorization": f"Bearer {plaintext}"})) == (
            "expired_api_key"
        )
    expired = AuditEvent.objects.filter(kind=AuditKind.KEY_EXPIRED)
    assert expired.count() == 1 and expired.get().at == T0 + timedelta(hours=1)  # recorded once, dated at the expiry


def test_an_expiry_set_since_the_key_was_remembered_is_enforced_by_the_insert(client):
    key, plaintext = make_key()
    with time_machine.travel(T0, tick=False):
        assert send(client, plaintext, "remembered").status_code == 200
        # As a roll in another process does: this process's remembered copy knows nothing of it.
        ApiKey.objects.filter(pk=key.pk).update(expires_at=T0 + timedelta(seconds=30))
    with time_machine.travel(T0 + timedelta(seconds=31), tick=False):
        refused = send(client, plaintext, "after")
    assert code_of(refused) == "expired_api_key"
    assert list(Message.objects.values_list("text", flat=True)) == ["remembered"]


def test_an_expired_key_no_longer_counts_towards_the_cap(settings):
    settings.MAX_ACTIVE_KEYS_PER_ACCOUNT = 1
    owner = UserFactory()
    with time_machine.travel(T0, tick=False):
        create_key(owner, "short", expires_at=T0 + timedelta(minutes=5))
    with time_machine.travel(T0 + timedelta(minutes=6), tick=False):
        assert create_key(owner, "next")[0].pk


def test_a_roll_keeps_the_old_secret_working_for_the_overlap_only(client):
    owner = UserFactory()
    with time_machine.travel(T0, tick=False):
        old, old_secret = make_key(owner, "deploys", scopes=[Scope.MESSAGES_SEND, Scope.PROFILE_READ])
        assert send(client, old_secret).status_code == 200
        new, new_secret = roll_key(old, timedelta(hours=1))
    assert new_secret != old_secret
    assert (new.name, new.scope_set) == ("deploys", {Scope.MESSAGES_SEND, Scope.PROFILE_READ})
    assert ApiKey.objects.get(pk=old.pk).replaced_by_id == new.pk

    with time_machine.travel(T0 + timedelta(minutes=59), tick=False):
        assert send(client, old_secret).status_code == 200
        assert send(client, new_secret).status_code == 200
    with time_machine.travel(T0 + timedelta(minutes=61), tick=False):
        assert code_of(send(client, old_secret)) == "expired_api_key"
        assert send(client, new_secret).status_code == 200
    assert kinds(owner) == ["key_created", "key_rolled", "key_expired"]


def test_a_roll_without_overlap_stops_the_old_secret_at_once(client):
    old, old_secret = make_key()
    _, new_secret = roll_key(old, timedelta(0))
    assert code_of(send(client, old_secret)) == "expired_api_key"
    assert send(client, new_secret).status_code == 200


def test_a_roll_never_outlives_the_keys_own_expiry():
    with time_machine.travel(T0, tick=False):
        old, _ = create_key(UserFactory(), "short", expires_at=T0 + timedelta(minutes=10))
        new, _ = roll_key(old, timedelta(days=7))
    assert ApiKey.objects.get(pk=old.pk).expires_at == T0 + timedelta(minutes=10)
    assert new.expires_at == T0 + timedelta(minutes=10)


def test_a_key_is_rolled_once_and_only_while_active():
    old, _ = make_key()
    roll_key(old, timedelta(hours=1))
    with pytest.raises(RollRefused, match="rolled already"):
        roll_key(ApiKey.objects.get(pk=old.pk), timedelta(hours=1))
    revoked, _ = make_key()
    revoke_key(revoked)
    with pytest.raises(RollRefused, match="revoked or expired"):
        roll_key(revoked, timedelta(hours=1))


# --- the console ----------------------------------------------------------------------------------------------------
@pytest.fixture
def owner_client(client):
    owner = UserFactory()
    client.force_login(owner)
    client.owner = owner
    return client


def test_the_console_rolls_a_key_and_shows_the_new_secret_once(owner_client):
    key, _ = make_key(owner_client.owner, "deploys")
    assert "How long the old secret keeps working" in owner_client.get(f"/keys/{key.pk}/roll/").content.decode()

    shown = owner_client.post(f"/keys/{key.pk}/roll/", {"overlap_hours": "24"})

    new = ApiKey.objects.get(replaced_by__isnull=True, owner=owner_client.owner)
    assert secret_on(shown) and new.hint.endswith(secret_on(shown)[-4:])
    assert "no-store" in shown["Cache-Control"]
    assert ApiKey.objects.get(pk=key.pk).expires_at is not None
    again = owner_client.post(f"/keys/{key.pk}/roll/", {"overlap_hours": "24"}, follow=True)
    assert "rolled already" in again.content.decode()
    assert ApiKey.objects.filter(owner=owner_client.owner).count() == 2


def test_the_console_sets_an_expiry_on_a_new_key(owner_client):
    with time_machine.travel(T0, tick=False):
        nonce = form_nonce(owner_client, "/keys/new/")
        owner_client.post("/keys/new/", {"name": "one-off", "nonce": nonce, "expires_in_days": "7", **DEFAULT_SCOPES})
    assert ApiKey.objects.get(owner=owner_client.owner).expires_at == T0 + timedelta(days=7)


def test_rename_is_audited_and_escaped_everywhere(owner_client):
    key, _ = make_key(owner_client.owner, "deploys")
    hostile = '<script>alert("x")</script>'

    owner_client.post(f"/keys/{key.pk}/rename/", {"name": hostile})

    assert ApiKey.objects.get(pk=key.pk).name == hostile
    for page in ("/keys/", f"/keys/{key.pk}/", "/settings/audit-log/"):
        html = owner_client.get(page).content.decode()
        assert hostile not in html and "&lt;script&gt;" in html, page
    assert kinds(owner_client.owner)[-1] == "key_renamed"


def test_send_test_message_records_it_through_the_key(owner_client):
    key, _ = make_key(owner_client.owner, "deploys")

    response = owner_client.post(f"/keys/{key.pk}/test-message/")

    message = Message.objects.get(api_key=key)
    assert "Test message from the console" in message.text
    assert response.status_code == 302 and message.public_id in response["Location"]


def test_send_test_message_needs_messages_send(owner_client):
    key, _ = make_key(owner_client.owner, "reader", scopes=[Scope.RECEIPTS_READ])
    page = owner_client.post(f"/keys/{key.pk}/test-message/", follow=True).content.decode()
    assert "lacks messages:send" in page
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("rename/", {"name": "x"}),
        ("roll/", {"overlap_hours": "1"}),
        ("test-message/", {}),
        ("scopes/", {"scopes": ["profile:read"]}),
        ("revoke/", {}),
    ],
)
def test_every_key_action_needs_the_csrf_token(path, data):
    key, _ = make_key(name="deploys")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(key.owner)
    assert strict.post(f"/keys/{key.pk}/{path}", data).status_code == 403
    after = ApiKey.objects.get(pk=key.pk)
    assert (after.name, after.replaced_by_id, after.revoked_at) == ("deploys", None, None)
    assert not Message.objects.exists()


@pytest.mark.parametrize("path", ["rename/", "roll/", "test-message/", "scopes/"])
def test_someone_elses_key_is_not_found(owner_client, path):
    key, _ = make_key(name="theirs")
    assert owner_client.post(f"/keys/{key.pk}/{path}", {"name": "mine", "overlap_hours": "1"}).status_code == 404


# --- the audit log --------------------------------------------------------------------------------------------------
def test_the_audit_log_lists_key_webhook_and_connection_changes_with_who(owner_client):
    from connections.models import Connection
    from connections.services import remove_connection

    key, plaintext = make_key(owner_client.owner, "ci")
    assert (
        post(owner_client, "/api/v1/api-keys/webhook", plaintext, {"condition": "When X", "action": "Do Y"}).status_code
        == 201
    )
    connection = Connection.objects.create(
        owner=owner_client.owner, name="Tracker", server_url="https://mcp.example.com/"
    )
    remove_connection(connection, by="you, in the console")
    owner_client.post(f"/keys/{key.pk}/scopes/", {"scopes": ["messages:send"]})
    owner_client.post(f"/keys/{key.pk}/revoke/")

    assert kinds(owner_client.owner) == [
        "key_created",
        "webhook_added",
        "connection_removed",
        "key_scopes_changed",
        "key_revoked",
    ]
    page = owner_client.get("/settings/audit-log/").content.decode()
    assert "API key “ci”" in page  # the webhook was added by the key
    assert "you, in the console" in page
    assert plaintext not in page


def test_the_audit_log_notes_an_expiry_nobody_met(owner_client):
    with time_machine.travel(T0, tick=False):
        create_key(owner_client.owner, "short", expires_at=T0 + timedelta(minutes=5))
    with time_machine.travel(T0 + timedelta(minutes=6), tick=False):
        owner_client.get("/settings/audit-log/")
        owner_client.get("/settings/audit-log/")
    assert kinds(owner_client.owner) == ["key_created", "key_expired"]


def test_the_audit_log_is_the_accounts_own(owner_client):
    make_key(UserFactory(email="other@example.com"), "their key")
    assert "their key" not in owner_client.get("/settings/audit-log/").content.decode()


def test_staff_read_the_audit_log_in_the_admin_and_cannot_change_it(client):
    from django.contrib.auth import get_user_model

    make_key(name="audited")
    staff = get_user_model().objects.create_superuser("admin@example.com", "admin@example.com", "x")
    client.force_login(staff)
    listing = client.get("/admin/accounts/auditevent/").content.decode()
    assert "audited" in listing
    event = AuditEvent.objects.get()
    assert client.post(f"/admin/accounts/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()
