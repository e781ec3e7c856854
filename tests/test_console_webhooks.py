"""The Webhooks pages: list, Add webhook (the token and secret shown once, with examples), revoke; and how a
firing looks in the thread."""

import hashlib
import re

import pytest
from django.test import Client

from conversations.models import Message, Role
from tests.conftest import post
from tests.console import form_nonce
from tests.factories import UserFactory
from triggers import services
from triggers.models import WebhookTrigger

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def add(client: Client, **fields):
    data = {"condition": "A deploy fails", "action": "Tell me which commit broke it", **fields}
    return client.post("/webhooks/new/", {**data, "nonce": form_nonce(client, "/webhooks/new/")})


def _shown(page, element_id: str) -> str:
    match = re.search(rf'id="{element_id}" type="text" value="([^"]+)"', page.content.decode())
    assert match, f"no #{element_id} on the page"
    return match.group(1)


def test_add_shows_the_url_and_token_once_and_the_token_fires(
    signed_in, user, client, django_capture_on_commit_callbacks
):
    page = add(signed_in)
    assert page.status_code == 200
    assert page["Cache-Control"].startswith("max-age=0") or "no-store" in page["Cache-Control"]
    trigger = WebhookTrigger.objects.get()
    token = _shown(page, "secret")
    url = _shown(page, "webhook-url")
    assert url == f"http://testserver/api/v1/inbound/webhook/{trigger.public_id}"
    assert trigger.owner == user and trigger.digest == hashlib.sha256(token.encode()).hexdigest()
    assert b"signing-secret" not in page.content
    assert b"alertmanager.yml" in page.content and token.encode() in page.content
    # The list shows it without the token.
    listing = signed_in.get("/webhooks/")
    assert b"A deploy fails" in listing.content and token.encode() not in listing.content
    with django_capture_on_commit_callbacks(execute=True):
        assert post(Client(), url, token, {"commit": "4f2c"}).status_code == 200
    assert Message.objects.filter(role=Role.USER).get().trigger == trigger


def test_a_signed_webhook_shows_its_secret_once(signed_in):
    page = add(signed_in, signed="on")
    secret = _shown(page, "signing-secret")
    trigger = WebhookTrigger.objects.get()
    assert services.signing_secret(trigger) == secret
    assert secret.encode() in page.content and b"X-Hub-Signature-256" in page.content


def test_a_resubmitted_form_makes_nothing_more(signed_in):
    nonce = form_nonce(signed_in, "/webhooks/new/")
    data = {"condition": "A", "action": "B", "nonce": nonce}
    assert signed_in.post("/webhooks/new/", data).status_code == 200
    again = signed_in.post("/webhooks/new/", data)
    assert again.status_code == 302
    assert WebhookTrigger.objects.count() == 1


@pytest.mark.parametrize("fields", [{"condition": "  "}, {"action": ""}, {"condition": "x" * 501}])
def test_a_blank_or_long_field_is_refused_on_the_form(signed_in, fields):
    page = add(signed_in, **fields)
    assert page.status_code == 200
    assert b"errorlist" in page.content
    assert not WebhookTrigger.objects.exists()


def test_revoke_asks_then_revokes_and_the_token_stops(signed_in, user, client):
    trigger, token, _ = services.create_trigger(user, "A", "B")
    assert signed_in.get(f"/webhooks/{trigger.pk}/revoke/").status_code == 200
    assert signed_in.post(f"/webhooks/{trigger.pk}/revoke/").status_code == 302
    trigger.refresh_from_db()
    assert trigger.is_revoked
    assert post(Client(), "/api/v1/inbound/webhook", token, {"a": 1}).status_code == 401


def test_another_persons_webhook_is_not_found(signed_in):
    theirs, _, _ = services.create_trigger(UserFactory(email="mallory@example.com"), "A", "B")
    assert signed_in.get(f"/webhooks/{theirs.pk}/revoke/").status_code == 404
    assert signed_in.post(f"/webhooks/{theirs.pk}/revoke/").status_code == 404
    assert b"mallory" not in signed_in.get("/webhooks/").content
    assert not WebhookTrigger.objects.get().is_revoked


def test_the_pages_need_a_log_in_and_csrf(user):
    anonymous = Client()
    assert anonymous.get("/webhooks/").status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    trigger, _, _ = services.create_trigger(user, "A", "B")
    assert strict.post(f"/webhooks/{trigger.pk}/revoke/").status_code == 403
    assert strict.post("/webhooks/new/", {"condition": "A", "action": "B"}).status_code == 403


def test_a_firing_in_the_thread_names_its_webhook_and_the_assistant_says_where_it_came_from(
    signed_in, user, django_capture_on_commit_callbacks
):
    _, token, _ = services.create_trigger(user, "A deploy fails", "Tell me which commit broke it")
    with django_capture_on_commit_callbacks(execute=True):
        post(Client(), "/api/v1/inbound/webhook", token, {"commit": "4f2c"})
    page = signed_in.get("/conversation/")
    assert "Webhook “A deploy fails”" in page.content.decode()
    reply = Message.objects.get(role=Role.ASSISTANT)
    assert reply.text.startswith("Received through one of your webhook triggers.")


def test_a_full_account_is_told_on_the_form(signed_in, settings):
    settings.MAX_ACTIVE_TRIGGERS_PER_ACCOUNT = 1
    add(signed_in)
    refused = add(signed_in, condition="Another")
    assert refused.status_code == 302
    assert "the most it may hold" in signed_in.get(refused["Location"]).content.decode()
    assert WebhookTrigger.objects.count() == 1


def test_the_webhook_token_never_reaches_the_logs(client, user, caplog, django_capture_on_commit_callbacks):
    import logging

    _, token, _ = services.create_trigger(user, "A", "B")
    with caplog.at_level(logging.DEBUG), django_capture_on_commit_callbacks(execute=True):
        post(Client(), "/api/v1/inbound/webhook", token, {"a": 1})
        post(Client(), "/api/v1/inbound/webhook", token + "x", {"a": 1})
    assert caplog.records and token not in caplog.text
