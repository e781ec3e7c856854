"""The local phone (console/views/local_phone.py, docs/howto/approve-from-phone.md#try-it-locally): under DEBUG only,
the texts sent to the person's linked Telegram chat with an approval request's buttons; a tap or a reply is read by
the Telegram adapter and channels/inbound.py as the webhook's would be, so it decides exactly as a real phone does."""

import re

import pytest
from django.urls import reverse

from assistant.models import Action, ActionState
from channels.adapters.base import button_data
from tests.test_phone_approvals import CHAT, ask, linked, reminders_of, wrong_codes

pytestmark = pytest.mark.django_db

PAGE = reverse("channels:local_phone")


@pytest.fixture
def debug(settings):
    settings.DEBUG = True


def test_the_page_shows_the_request_with_its_buttons_and_approve_runs_the_tool_once(
    debug, providers, send, client, django_capture_on_commit_callbacks
):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    client.force_login(person)

    page = client.get(PAGE).content.decode()
    assert "Approve this?" in page and "renew the domain" in page.lower()
    approve = button_data(True, action.approval_code)
    assert f'name="data" value="{approve}"' in page and "✖️ Deny" in page
    assert f"Reply YES {action.approval_code}" not in page  # the buttons take the reply line's place, as on Telegram
    message = re.search(r'name="message" value="([^"]+)"', page)
    assert message is not None

    tap = {"data": approve, "message": message.group(1)}
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(PAGE, tap, follow=True)
    assert "read it as: answer: approved." in answer.content.decode()
    assert Action.objects.get(pk=action.pk).state != ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 1
    assert providers.telegram.edited[-1]["text"].endswith("✅ Approved on Telegram.")  # the request's message

    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(PAGE, tap, follow=True)  # pressed again
    assert "read it as: answer: already" in again.content.decode()
    assert reminders_of(person) == 1


def test_a_reply_with_a_wrong_code_approves_nothing_and_the_right_one_does(
    debug, providers, send, client, django_capture_on_commit_callbacks
):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    client.force_login(person)
    [wrong] = wrong_codes(action, 1)

    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(PAGE, {"text": f"YES {wrong}"}, follow=True)
    assert "read it as: answer: unknown code." in answer.content.decode()
    assert Action.objects.get(pk=action.pk).state == ActionState.AWAITING_APPROVAL
    assert reminders_of(person) == 0

    with django_capture_on_commit_callbacks(execute=True):
        client.post(PAGE, {"text": f"yes {action.approval_code}"})
    assert reminders_of(person) == 1


def test_without_debug_the_page_is_not_there_and_not_in_the_navigation(providers, send, client):
    person = linked("telegram", CHAT)
    ask(send, person)
    client.force_login(person)
    assert client.get(PAGE).status_code == 404
    assert client.post(PAGE, {"text": "hello"}).status_code == 404
    assert "Local phone" not in client.get(reverse("keys:list")).content.decode()


def test_under_debug_the_navigation_links_it_and_a_post_needs_csrf(debug, client):
    person = linked("telegram", CHAT)
    client.force_login(person)
    assert f'href="{PAGE}"' in client.get(reverse("keys:list")).content.decode()
    client.handler.enforce_csrf_checks = True
    assert client.post(PAGE, {"text": "hello"}).status_code == 403


def test_a_tap_with_a_forged_token_runs_nothing_and_a_bad_message_is_no_error(debug, providers, send, client):
    person = linked("telegram", CHAT)
    action = ask(send, person)
    client.force_login(person)
    for message in ("", "abc", f"{CHAT}:x"):
        tap = {"data": button_data(True, action.approval_code)[:-1] + "A", "message": message}
        assert client.post(PAGE, tap).status_code == 302
    assert reminders_of(person) == 0


def test_login_is_required(debug, client):
    assert client.get(PAGE).status_code == 302
