"""Whatever a provider's signed callback holds, the answer is 200 or a 4xx in the error shape, never a 5xx: the
signature proves who sent a body, not that it has the documented shape. Hypothesis builds bodies of each provider's
shape with arbitrary values where the provider puts its own (NULs, lone surrogates, huge numbers, wrong types), and
arbitrary JSON; the fake providers sign them as the providers do."""

import json
from uuid import uuid4

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.models import LinkedAddress
from conversations.models import Message
from tests import providers as p
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TEXT = st.text(max_size=40)  # any code point: NUL and lone surrogates included
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
VALUES = st.recursive(
    SCALARS, lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3), max_leaves=8
)
NUMBER = "+14155550134"


@pytest.fixture
def linked():
    user = UserFactory()
    for channel in ("sms", "whatsapp", "imessage"):
        LinkedAddress.objects.create(user=user, channel=channel, address=NUMBER)
    LinkedAddress.objects.create(user=user, channel="telegram", address="4242")
    return user


def _answered_well(response) -> None:
    assert response.status_code < 500, response.content[:300]
    if response.status_code >= 400:
        body = response.json()
        assert body["success"] is False and body["code"] and body["message"]


def _json_dumps(value) -> bytes:
    # Lone surrogates travel as \\ud800 escapes, which JSON allows and Python reads back as such.
    return json.dumps(value, ensure_ascii=True).encode()


@FUZZ
@given(
    message=st.dictionaries(
        st.sampled_from(["from", "id", "timestamp", "type", "text", "image", "button", "interactive"]), VALUES
    ),
    mix=VALUES,
)
def test_whatsapp_cloud_events_of_any_content(client, providers, linked, message, mix):
    base = {"from": NUMBER[1:], "id": f"wamid.{uuid4().hex}", "type": "text", "text": {"body": "hi"}}
    for value in ({"messages": [{**base, **message}], "statuses": [message]}, {"messages": mix, "contacts": mix}):
        _answered_well(providers.whatsapp.event(value).send(client))
    raw = _json_dumps(mix)
    callback = p.Callback(
        "/channels/whatsapp/webhook", raw, "application/json", {"X-Hub-Signature-256": _meta_signature(raw)}
    )
    _answered_well(callback.send(client))


def _meta_signature(body: bytes) -> str:
    from channels.adapters.whatsapp_cloud import signature_of

    return signature_of(body, p.WHATSAPP_APP_SECRET)


@FUZZ
@given(
    message=st.dictionaries(st.sampled_from(["text", "caption", "chat", "from", "photo", "document", "date"]), VALUES),
    update_id=st.integers() | TEXT,
)
def test_telegram_updates_of_any_content(client, providers, linked, message, update_id):
    base = {"message_id": 1, "chat": {"id": 4242, "type": "private"}, "text": "hi"}
    _answered_well(providers.telegram.update({"update_id": update_id, "message": {**base, **message}}).send(client))


@FUZZ
@given(
    data=st.dictionaries(
        st.sampled_from(
            ["guid", "text", "isFromMe", "handle", "chats", "attachments", "dateCreated", "error", "dateRead"]
        ),
        VALUES,
    ),
    kind=st.sampled_from(["new-message", "updated-message"]) | TEXT,
)
def test_bluebubbles_events_of_any_content(client, providers, linked, data, kind):
    base = {"guid": uuid4().hex, "text": "hi", "isFromMe": False, "handle": {"address": NUMBER}}
    _answered_well(providers.bluebubbles.event(kind, {**base, **data}).send(client))


@FUZZ
@given(
    form=st.dictionaries(
        st.sampled_from(
            ["From", "Body", "MessageSid", "NumMedia", "MediaUrl0", "ProfileName", "MessageStatus", "ErrorCode"]
        ),
        st.text(max_size=40).filter(lambda t: all(not 0xD800 <= ord(c) <= 0xDFFF for c in t)),
    )
)
def test_twilio_forms_of_any_content(client, providers, linked, form):
    base = {"From": NUMBER, "Body": "hi", "MessageSid": "SM" + uuid4().hex}
    _answered_well(providers.twilio.signed("/channels/twilio/inbound", {**base, **form}).send(client))
    _answered_well(providers.twilio.signed("/channels/twilio/status", {**base, **form}).send(client))


@pytest.mark.parametrize("count", ["²", "٣", "1²"])
def test_a_media_count_in_other_digits_is_read_as_none(client, providers, linked, count):
    # str.isdigit() takes "²", which int() refuses: this was a 500 (found by the fuzz test above).
    form = {"From": NUMBER, "Body": "hi", "MessageSid": "SM" + uuid4().hex, "NumMedia": count, "MediaUrl0": "x"}
    _answered_well(providers.twilio.signed("/channels/twilio/inbound", form).send(client))


def test_what_is_recorded_holds_no_nul(client, providers, linked):
    providers.telegram.update(
        {"update_id": 1, "message": {"chat": {"id": 4242, "type": "private"}, "text": "a\x00b\ud800"}}
    ).send(client)
    (message,) = Message.objects.filter(role="user")
    assert message.text == "ab?"


def test_deep_nesting_is_a_400(client, providers):
    raw = b"[" * 100000 + b"]" * 100000
    callback = p.Callback(
        "/channels/whatsapp/webhook", raw, "application/json", {"X-Hub-Signature-256": _meta_signature(raw)}
    )
    response = callback.send(client)
    assert response.status_code == 400


@pytest.fixture
def client():
    return Client()
