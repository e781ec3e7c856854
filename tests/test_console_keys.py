"""API Keys pages: list, Add API Key (the secret shown once), a key's page, revoke, Settings → Advanced."""

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from conversations.models import Delivery, Endpoint
from ingestion.hotpath.recording import record_user_message
from keys import tokens
from keys.models import ApiKey, Generation
from tests.console import DEFAULT_SCOPES, form_nonce, secret_on
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def strangers_key():
    key, _ = make_key(UserFactory(email="mallory@example.com"), "mallory's bot")
    return key


def add_key(client: Client, name: str = "deploy bot", path: str = "/keys/new/", form_page: str = "/keys/new/"):
    # A browser sends the scopes ticked by default (messages:send, receipts:read); the legacy form has none.
    return client.post(path, {"name": name, "nonce": form_nonce(client, form_page), **DEFAULT_SCOPES})


def test_the_list_shows_every_key_of_the_user_and_no_one_elses(signed_in, user, strangers_key):
    active, _ = make_key(user, "nightly backup")
    revoked, _ = make_key(user, "old laptop")
    legacy, _ = make_key(user, "ios shortcut", Generation.V1)
    revoked.revoked_at = timezone.now()
    revoked.save()

    page = signed_in.get("/keys/").content.decode()

    for key in (active, revoked, legacy):
        assert key.name in page
        assert key.hint in page
    assert "Revoked" in page and "Active" in page and "V1 · legacy" in page
    assert "mallory" not in page
    assert page.index("nightly backup") < page.index("old laptop")  # active keys first


def test_adding_a_key_shows_its_secret_once_with_no_store_and_examples_for_this_server(signed_in, user):
    response = add_key(signed_in, "GitHub deploys")

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    plaintext = secret_on(response)
    key = ApiKey.objects.get(owner=user)
    assert (key.name, key.generation, key.digest) == ("GitHub deploys", Generation.V2, tokens.digest(plaintext))
    page = response.content.decode()
    assert "will not be shown again" in page
    assert "http://testserver/api/v1/inbound/api-message" in page
    assert "base_url=&quot;http://testserver/api/v1&quot;" in page  # the Python snippet names this server itself
    assert "secrets.POKE_API_KEY" in page


def test_the_secret_never_reaches_the_session_the_messages_or_a_later_page(signed_in, user):
    plaintext = secret_on(add_key(signed_in))

    for session in Session.objects.all():
        assert plaintext not in str(session.get_decoded())
    for path in ("/keys/", f"/keys/{ApiKey.objects.get().pk}/", "/keys/new/", "/conversation/"):
        assert plaintext not in signed_in.get(path).content.decode()


def test_submitting_the_same_form_again_creates_no_second_key(signed_in, user):
    nonce = form_nonce(signed_in, "/keys/new/")
    first = signed_in.post("/keys/new/", {"name": "deploy bot", "nonce": nonce, **DEFAULT_SCOPES})
    again = signed_in.post("/keys/new/", {"name": "deploy bot", "nonce": nonce, **DEFAULT_SCOPES}, follow=True)

    assert first.status_code == 200
    assert ApiKey.objects.filter(owner=user).count() == 1
    assert again.redirect_chain == [("/keys/", 302)]
    page = again.content.decode()
    assert "No new key was created" in page
    assert secret_on(first) not in page


def test_a_form_token_of_another_user_creates_nothing(signed_in, user):
    other = Client()
    other.force_login(UserFactory())
    nonce = form_nonce(other, "/keys/new/")
    signed_in.post("/keys/new/", {"name": "sneaky", "nonce": nonce, **DEFAULT_SCOPES})
    assert not ApiKey.objects.exists()


def test_a_key_needs_a_name(signed_in):
    response = add_key(signed_in, "   ")
    assert response.status_code == 200
    assert "Give the key a name" in response.content.decode()
    assert not ApiKey.objects.exists()
    # The same form can then be sent again with a name: the token was not used up by the failed attempt.
    nonce = response.context["form"]["nonce"].value()
    assert signed_in.post("/keys/new/", {"name": "named", "nonce": nonce, **DEFAULT_SCOPES}).status_code == 200
    assert ApiKey.objects.get().name == "named"


def test_a_keys_page_shows_its_recent_deliveries_and_requests_per_day(signed_in, user):
    key, _ = make_key(user, "monitor")
    other, _ = make_key(user, "other")
    now = timezone.now()
    for days_ago, count in ((0, 3), (2, 1), (20, 5)):
        for n in range(count):
            message = record_user_message(user=user, endpoint=Endpoint.CURRENT, text=f"m{days_ago}-{n}", api_key=key)
            Delivery.objects.filter(message=message).update(created_at=now - timedelta(days=days_ago))
    record_user_message(user=user, endpoint=Endpoint.CURRENT, text="through the other key", api_key=other)
    # The owner's approval of one of the key's requests carries the key too: an answer, not a request of the key.
    record_user_message(user=user, endpoint=Endpoint.APPROVAL, text="Approved: send the mail", api_key=key)

    response = signed_in.get(f"/keys/{key.pk}/")

    assert response.status_code == 200
    requests = [day.requests for day in response.context["series"]]
    assert len(requests) == 14
    assert requests[-1] == 3 and requests[-3] == 1 and sum(requests) == 4
    page = response.content.decode()
    assert "4 in total" in page
    assert page.count('class="bar"') == 2
    assert "m0-0" in page and "POST /api/v1/inbound/api-message" in page and "Queued" in page
    assert "through the other key" not in page and "Approved: send the mail" not in page


def test_the_chart_reads_only_the_window_of_the_keys_deliveries(user):
    """The day filter is a range on created_at, which the (api_key, created_at) index bounds: a filter on its date
    read every delivery the key ever made (55 ms at 50k)."""
    from django.db import connection

    from console import activity

    key, _ = make_key(user, "monitor")
    window = activity._start_of(timezone.localdate())
    query = activity.requests_of(key).filter(created_at__gte=window)
    sql = str(query.query)
    assert '"created_at" >=' in sql and "DATE(" not in sql.upper() and "django_datetime_cast_date" not in sql
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")  # an empty table: ask for the plan the index gives
            compiled, params = query.query.sql_with_params()
            cursor.execute(f"EXPLAIN {compiled}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("RESET enable_seqscan")
        assert "created_at" in plan.split("Index Cond:", 1)[1].split("\n", 1)[0], plan


@pytest.mark.parametrize("path", ["/keys/{pk}/", "/keys/{pk}/revoke/"])
def test_another_users_key_is_not_found(signed_in, strangers_key, path):
    response = signed_in.get(path.format(pk=strangers_key.pk))
    assert response.status_code == 404
    assert "mallory" not in response.content.decode()


def test_another_users_key_cannot_be_revoked(signed_in, strangers_key):
    assert signed_in.post(f"/keys/{strangers_key.pk}/revoke/").status_code == 404
    strangers_key.refresh_from_db()
    assert strangers_key.revoked_at is None


def test_revoking_asks_first_then_revokes_on_post(signed_in, user):
    key, _ = make_key(user, "old laptop")
    kept, _ = make_key(user, "kept")

    confirm = signed_in.get(f"/keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert confirm.status_code == 200 and key.revoked_at is None
    assert "Revoke “old laptop”?" in confirm.content.decode()

    done = signed_in.post(f"/keys/{key.pk}/revoke/", follow=True)

    key.refresh_from_db()
    kept.refresh_from_db()
    assert key.revoked_at is not None and kept.revoked_at is None
    assert done.redirect_chain == [("/keys/", 302)]
    assert "Revoked “old laptop”" in done.content.decode()
    assert "already revoked" in signed_in.post(f"/keys/{key.pk}/revoke/", follow=True).content.decode()


def test_revoking_needs_the_csrf_token(user):
    key, _ = make_key(user)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(f"/keys/{key.pk}/revoke/").status_code == 403
    assert client.post("/keys/new/", {"name": "x"}).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None


def test_advanced_settings_create_a_v1_key_shown_once_and_marked_deprecated(signed_in, user):
    page = signed_in.get("/settings/advanced/").content.decode()
    assert "deprecated" in page
    assert "/api/v1/inbound/api-message" in page  # the way to move on

    response = add_key(
        signed_in, "ios shortcut", path="/settings/advanced/legacy-key/", form_page="/settings/advanced/"
    )

    assert "no-store" in response["Cache-Control"]
    plaintext = secret_on(response)
    assert plaintext.startswith("pk_")
    key = ApiKey.objects.get(owner=user)
    assert key.generation == Generation.V1 and key.digest == tokens.digest(plaintext)
    assert "http://testserver/api/v1/inbound-sms/webhook" in response.content.decode()
    listed = signed_in.get("/settings/advanced/").content.decode()
    assert "ios shortcut" in listed and plaintext not in listed


def test_advanced_settings_list_only_v1_keys_and_revoking_one_returns_there(signed_in, user):
    legacy, _ = make_key(user, "ios shortcut", Generation.V1)
    make_key(user, "modern key")
    page = signed_in.get("/settings/advanced/").content.decode()
    assert "ios shortcut" in page and "modern key" not in page

    response = signed_in.post(f"/keys/{legacy.pk}/revoke/")
    assert response["Location"] == "/settings/advanced/"


def test_a_legacy_key_needs_a_name_too(signed_in):
    response = signed_in.post(
        "/settings/advanced/legacy-key/", {"name": "", "nonce": form_nonce(signed_in, "/settings/advanced/")}
    )
    assert response.status_code == 200
    assert "name" in response.context["form"].errors
    assert not ApiKey.objects.exists()


def test_a_keys_tool_list_names_each_tool_once_with_what_it_does(signed_in, user):
    key, _ = make_key(user, "ci", Generation.V2)
    page = signed_in.get(f"/keys/{key.pk}/").content.decode()
    tools = page[page.index('id="tools"') :]

    assert tools.count("<code>schedule_reminder</code>") == 1
    assert tools.count("schedule_reminder</span>") == 0  # the name was its own label: shown twice, said nothing
    assert "Remind the person of something at a time, once or repeating" in tools
