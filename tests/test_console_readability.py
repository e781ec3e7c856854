"""What the console shows of messages that are long or have no text, times, and the ways between pages (issue 18,
items 6 and 12; the phone-width checks are in tests/browser/test_phone_console.py)."""

import re

import pytest

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from ingestion.hotpath.recording import record_user_message
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NO_TEXT = {"event": "deploy", "service": "shop-api", "status": "ok"}


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_a_message_without_text_shows_a_summary_of_its_json(signed_in, user, v2):
    record_user_message(user=user, endpoint=Endpoint.CURRENT, text="", context=NO_TEXT, api_key=v2[0])

    page = signed_in.get("/conversation/").content.decode()
    bubble = re.search(r'<div class="msg__text[^"]*">(.*?)</div>', page, re.S)[1]

    assert bubble.strip(), "an empty bubble"
    assert bubble.startswith("<code>{") and "\n" not in bubble  # one line (members in the order the database keeps)
    for name, value in NO_TEXT.items():
        assert f"&quot;{name}&quot;: &quot;{value}&quot;" in bubble


def test_a_long_json_summary_is_one_short_line():
    from console.presentation import SUMMARY_CHARS, json_summary

    summary = json_summary({"url": "https://ci.example.com/" + "8" * 500, "status": "ok"})
    assert len(summary) == SUMMARY_CHARS and summary.endswith("…") and "\n" not in summary


def test_a_long_message_is_shortened_in_the_thread_with_a_way_to_see_all_of_it(signed_in, user, v2):
    text = "word " * 48_000  # 240 KB
    message = record_user_message(
        user=user, endpoint=Endpoint.CURRENT, text=text, context={"message": text}, api_key=v2[0]
    )

    page = signed_in.get("/conversation/")
    html = page.content.decode()
    assert len(page.content) < 30_000  # not 480 KB (the text and the context JSON that repeats it)
    assert f'href="/conversation/messages/{message.public_id}/" data-expand>Show all (234 KB)</a>' in html

    whole = signed_in.get(f"/conversation/messages/{message.public_id}/")
    assert whole.status_code == 200 and text.strip() in whole.content.decode()
    expanded = signed_in.get(f"/conversation/messages/{message.public_id}/", headers={"Accept": "application/json"})
    assert expanded.json()["id"] == message.public_id
    assert text.strip() in expanded.json()["html"] and "Show all" not in expanded.json()["html"]


def test_a_short_message_is_not_shortened(signed_in, user):
    record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Book a table for two at 8")
    html = signed_in.get("/conversation/").content.decode()
    assert "Book a table for two at 8" in html and "Show all" not in html


def test_times_say_their_time_zone(signed_in, user):
    record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="hi")
    html = signed_in.get("/conversation/").content.decode()
    (shown,) = re.findall(r"<time [^>]*>([^<]+)</time>", html)
    assert shown.endswith(" UTC")  # the person's zone (Settings), UTC until they choose one


def test_a_delivery_on_the_key_page_links_to_the_message_what_became_of_it_and_the_reply(signed_in, user, v2, send):
    message_id = send(v2[1], {"message": "Remind me to call Sam"}).json()["id"]
    record_user_message(user=user, endpoint=Endpoint.CURRENT, text="", context=NO_TEXT, api_key=v2[0])

    page = signed_in.get(f"/keys/{v2[0].pk}/").content.decode()
    rows = re.findall(r'<td data-label="Message">(.*?)</td>', page, re.S)
    assert (
        f'href="/conversation/messages/{message_id}/"' in rows[-1]
        or f'href="/conversation/messages/{message_id}/"' in rows[0]
    )
    assert any("&quot;event&quot;: &quot;deploy&quot;" in row for row in rows)  # no blank cell

    receipt = signed_in.get(f"/conversation/messages/{message_id}/").content.decode()
    delivery = Delivery.objects.select_related("reply").get(message__public_id=message_id)
    assert delivery.status == DeliveryStatus.DELIVERED
    assert "What became of it" in receipt and "Delivered" in receipt
    assert delivery.reply.text in receipt.replace("&quot;", '"').replace("&#x27;", "'")


def test_a_reply_s_page_shows_the_message_it_answers(signed_in, user, v2, send):
    message_id = send(v2[1], {"message": "Remind me to call Sam"}).json()["id"]
    reply = Delivery.objects.get(message__public_id=message_id).reply

    page = signed_in.get(f"/conversation/messages/{reply.public_id}/").content.decode()
    assert "The assistant's reply" in page and "In answer to:" in page and "Remind me to call Sam" in page


@pytest.mark.parametrize("message_id", ["msg_nonsense", "%00", "x" * 300])
def test_a_message_page_of_nothing_is_a_404(signed_in, message_id):
    assert signed_in.get(f"/conversation/messages/{message_id}/").status_code == 404


def test_someone_else_s_message_page_is_a_404(signed_in):
    stranger = UserFactory(email="mallory@example.com")
    theirs = Message.objects.create(
        conversation=conversation_of(stranger), role=Role.ASSISTANT, source=Source.ASSISTANT, text="theirs"
    )
    assert signed_in.get(f"/conversation/messages/{theirs.public_id}/").status_code == 404


def test_the_api_docs_page_links_back_to_the_console(client, user):
    docs = client.get("/api/docs/").content.decode()
    assert '<nav class="docs-back" aria-label="Back to the console"><a href="/">' in docs

    client.force_login(user)
    assert client.get("/").headers["Location"] == "/keys/"  # where that link takes a signed-in person


def test_the_ctrl_enter_hint_is_marked_for_keyboards_only(signed_in):
    html = signed_in.get("/conversation/").content.decode()
    assert '<span class="composer__keys">Press <kbd>Ctrl</kbd>+<kbd>Enter</kbd> to send. </span>' in html
