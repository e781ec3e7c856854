"""A webhook's delivery log page (Webhooks → Log): its owner's only, newest first, times in their zone, each accepted
firing linked to its message with its delivery's status, each refusal with its reason; nothing from a payload or a
condition rendered as markup."""

import re
from datetime import UTC, datetime

import pytest
from django.test import Client

from accounts.services import update_contact
from assistant.models import Action, ActionState, ToolKind
from conversations.models import Delivery, DeliveryStatus
from ingestion import trigger_log
from ingestion.models import FiringOutcome, TriggerFiring
from tests.conftest import post
from tests.factories import UserFactory
from triggers import services

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
MOMENT = datetime(2026, 11, 25, 17, 50, tzinfo=UTC)  # 12:50 in New York (EST)


@pytest.fixture
def trigger(user):
    made, token, _ = services.create_trigger(user, "A deploy fails", "Tell me which commit")
    return made, token


@pytest.fixture
def signed_in(client, user):
    update_contact(user, time_zone="America/New_York")
    client.force_login(user)
    return client


def log_url(trigger) -> str:
    return f"/webhooks/{trigger.pk}/log/"


def fire(trigger, token, body, **headers):
    return post(Client(), f"/api/v1/inbound/webhook/{trigger.public_id}", token, body, **headers)


def rows(page: str) -> list[str]:
    return re.findall(r"<tr data-outcome=.*?</tr>", page, re.S)


def test_the_list_links_each_webhook_to_its_log(signed_in, trigger):
    made, _ = trigger
    assert log_url(made) in signed_in.get("/webhooks/").content.decode()


def test_an_empty_log_says_so(signed_in, trigger):
    page = signed_in.get(log_url(trigger[0]))
    assert page.status_code == 200
    assert "No requests yet" in page.content.decode()


def test_the_log_lists_firings_newest_first_with_their_status_message_and_reason(signed_in, trigger, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1000/m"
    made, token = trigger
    accepted = fire(made, token, {"repository": {"full_name": "acme/shop"}, "ref": "refs/heads/main", "commits": []})
    for _ in range(3):
        fire(made, token[:-1] + ("1" if token.endswith("0") else "0"), {"order": 1})
    message_id = accepted.json()["id"]
    Delivery.objects.filter(message__public_id=message_id).update(status=DeliveryStatus.DELIVERED)
    TriggerFiring.objects.filter(outcome=FiringOutcome.ACCEPTED).update(at=MOMENT)

    page = signed_in.get(log_url(made)).content.decode()

    refused, accepted_row = rows(page)
    assert 'data-code="invalid_webhook_token"' in refused and "badge--failed" in refused
    assert "Wrong token" in refused and 'data-count="3"' in refused and "None recorded" in refused
    assert "badge--delivered" in accepted_row and "GitHub push to acme/shop main: 0 commits" in accepted_row
    assert f'href="/conversation/messages/{message_id}/"' in accepted_row
    assert re.search(r"<time [^>]*>Nov 25, 12:50 EST</time>", accepted_row)


def test_an_accepted_firing_waiting_for_approval_says_so(signed_in, trigger):
    made, token = trigger
    message_id = fire(made, token, {"order": 1}).json()["id"]
    delivery = Delivery.objects.get(message__public_id=message_id)
    Action.objects.create(
        delivery=delivery, kind=ToolKind.BUILT_IN, tool="send_email", state=ActionState.AWAITING_APPROVAL
    )

    (row,) = rows(signed_in.get(log_url(made)).content.decode())
    assert "Awaiting approval" in row


def test_only_the_owner_sees_the_log(client, trigger):
    made, token = trigger
    fire(made, token, {"order": 1})
    assert client.get(log_url(made)).status_code == 302  # to the log-in page
    client.force_login(UserFactory(email="someone@example.com"))
    assert client.get(log_url(made)).status_code == 404
    assert client.get("/webhooks/999999/log/").status_code == 404


def test_the_log_page_takes_no_post(signed_in, trigger):
    """No form on it; a cross-site POST (no CSRF token) changes nothing."""
    made, token = trigger
    fire(made, token, {"order": 1})
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(made.owner)
    assert csrf_client.post(log_url(made)).status_code in (403, 405)
    assert signed_in.post(log_url(made)).status_code == 405
    assert TriggerFiring.objects.count() == 1


def test_payloads_and_the_condition_are_rendered_as_text(signed_in, user):
    made, token, _ = services.create_trigger(user, f"When {SCRIPT} happens", "Act")
    push = {
        "ref": f"refs/heads/{SCRIPT}",
        "repository": {"full_name": SCRIPT},
        "pusher": {"name": SCRIPT},
        "commits": [],
        "head_commit": {"message": SCRIPT},
    }
    pull = {
        "action": SCRIPT,
        "repository": {"full_name": SCRIPT},
        "sender": {"login": SCRIPT},
        "pull_request": {"number": SCRIPT, "title": SCRIPT},
    }
    alert = {
        "receiver": SCRIPT,
        "alerts": [{"status": "firing", "labels": {"alertname": SCRIPT, "severity": SCRIPT}}],
        "commonAnnotations": {"summary": SCRIPT},
    }
    fire(made, token, push, **{"X-GitHub-Event": "push"})
    fire(made, token, pull, **{"X-GitHub-Event": SCRIPT})
    fire(made, token, pull, **{"X-GitHub-Event": "pull_request"})
    fire(made, token, alert)
    fire(made, token, {SCRIPT: SCRIPT})
    trigger_log.note(FiringOutcome.REFUSED, trigger=made, code=SCRIPT, summary=SCRIPT)

    page = signed_in.get(log_url(made)).content.decode()

    assert len(rows(page)) == 6
    assert "<script>" not in page.replace('<script src="', "")
    assert page.count("&lt;script&gt;") >= 12
