"""Webhook triggers through the API (Django's test client): making one with a key, firing it with its token or a
GitHub-style signature, and every way a request can be wrong."""

import hashlib
import hmac
import json

import pytest

from conversations.models import Delivery, Endpoint, Message, Role, Source
from ingestion.models import IdempotencyRecord
from keys.services import revoke_key
from tests.conftest import post
from tests.factories import make_key
from triggers import services
from triggers.models import WebhookTrigger

pytestmark = pytest.mark.django_db

CREATE = "/api/v1/api-keys/webhook"
FIRE = "/api/v1/inbound/webhook"
ORDER = {"condition": "When a new order is placed", "action": "Send me a summary of the order"}


@pytest.fixture
def fire(client, django_capture_on_commit_callbacks):
    def fire(token, body, path=FIRE, **headers):
        with django_capture_on_commit_callbacks(execute=True):
            return post(client, path, token, body, **headers)

    return fire


@pytest.fixture
def trigger(user):
    made, token, _ = services.create_trigger(user, ORDER["condition"], ORDER["action"])
    return made, token


def test_a_key_makes_a_trigger_and_gets_its_url_and_token_once(client, v2):
    key, plaintext = v2
    response = post(client, CREATE, plaintext, ORDER)

    assert response.status_code == 201
    body = response.json()
    made = WebhookTrigger.objects.get()
    assert body["triggerId"] == made.public_id
    assert body["webhookUrl"] == f"http://testserver/api/v1/inbound/webhook/{made.public_id}"
    assert body["webhookToken"].startswith("pwh_") and len(body["webhookToken"]) == 42
    assert services.looks_like_token(body["webhookToken"])
    assert response["Cache-Control"] == "no-store"
    assert (made.owner, made.condition, made.action, made.created_with) == (key.owner, *ORDER.values(), key)
    # Only the digest is stored; no column holds the token.
    assert made.digest == hashlib.sha256(body["webhookToken"].encode()).hexdigest()
    assert body["webhookToken"] not in json.dumps(list(WebhookTrigger.objects.values()), default=str)
    assert "signingSecret" not in body


def test_firing_records_the_action_as_the_owners_message_with_the_payload_as_context(fire, trigger, user):
    made, token = trigger
    payload = {"order": 1042, "customer": "Sam", "items": [{"sku": "A1", "qty": 2}]}

    response = fire(token, payload)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["success"] is True
    message = Message.objects.get(role=Role.USER)
    assert body["id"] == message.public_id
    assert message.conversation.user == user
    assert message.source == Source.WEBHOOK_TRIGGER
    assert message.trigger == made and message.api_key is None
    assert message.text.startswith("Send me a summary of the order\n")
    assert "“When a new order is placed”" in message.text
    assert message.context == payload
    assert message.delivery.endpoint == Endpoint.WEBHOOK_TRIGGER
    # Handed to the assistant like any other message: the local assistant has answered in the thread.
    assert Message.objects.filter(role=Role.ASSISTANT).count() == 1
    made.refresh_from_db()
    assert made.fire_count == 1 and made.last_fired_at is not None


def test_the_pokes_own_url_without_the_id_works_with_the_token(fire, trigger):
    _, token = trigger
    assert fire(token, {"a": 1}, path=FIRE).status_code == 200
    assert fire(token, {"a": 1}, path=FIRE + "/").status_code == 200
    assert Message.objects.filter(role=Role.USER).count() == 2


def test_the_receipt_of_a_firing_is_read_with_the_triggers_token_and_nothing_else(client, fire, trigger, user, v2):
    _, token = trigger
    message_id = fire(token, {"a": 1}).json()["id"]

    def read(credential, id_=message_id):
        return client.get(f"/api/v1/inbound/messages/{id_}", headers={"Authorization": f"Bearer {credential}"})

    receipt = read(token)
    assert receipt.status_code == 200
    assert receipt.json()["status"] == "delivered"
    assert "reply" not in receipt.json()  # the reply is for the person, not for whatever fired the trigger
    # Like a key's receipts: another credential, even of the same account, finds nothing.
    assert read(v2[1]).status_code == 404
    _, other_token, _ = services.create_trigger(user, "Other", "Other")
    assert read(other_token).status_code == 404
    # And a trigger's token reads nothing a key sent.
    key_message = post(client, "/api/v1/inbound/api-message", v2[1], {"message": "hi"}).json()["id"]
    assert read(token, key_message).status_code == 404
    assert read("pwh_" + "A" * 38).status_code == 401


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "missing_authorization"),
        ("Token abc", "malformed_authorization"),
        ("Bearer pwh_" + "A" * 38, "invalid_webhook_token"),  # the right shape, a wrong checksum
        ("Bearer nothing-like-a-token", "invalid_webhook_token"),
    ],
)
def test_a_wrong_token_is_401_and_records_nothing(client, trigger, authorization, code):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.post(FIRE, data=json.dumps({"a": 1}), content_type="application/json", headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == code
    assert response.json()["success"] is False
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not Message.objects.exists()


def test_an_api_key_does_not_fire_a_trigger(fire, trigger, v2):
    response = fire(v2[1], {"a": 1})
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_webhook_token"
    assert "API key" in response.json()["message"]
    assert not Message.objects.exists()


def test_a_webhook_token_is_no_api_key(client, trigger):
    response = post(client, "/api/v1/inbound/api-message", trigger[1], {"message": "hi"})
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_api_key"


def test_another_triggers_token_is_refused_on_this_triggers_url(fire, trigger, user):
    made, _ = trigger
    _, other_token, _ = services.create_trigger(user, "Another", "Do something")
    response = fire(other_token, {"a": 1}, path=f"{FIRE}/{made.public_id}")
    assert response.status_code == 401
    assert not Message.objects.exists()


def test_a_revoked_trigger_is_401(fire, trigger):
    made, token = trigger
    services.revoke_trigger(made)
    response = fire(token, {"a": 1})
    assert response.status_code == 401
    assert response.json()["code"] == "revoked_webhook_trigger"
    assert not Message.objects.exists()


def test_a_deactivated_accounts_triggers_are_refused(fire, trigger, user):
    user.is_active = False
    user.save()
    response = fire(trigger[1], {"a": 1})
    assert (response.status_code, response.json()["code"]) == (401, "account_disabled")
    assert not Message.objects.exists()


def test_a_trigger_outlives_the_key_that_made_it(client, fire, v2):
    key, plaintext = v2
    token = post(client, CREATE, plaintext, ORDER).json()["webhookToken"]
    revoke_key(key)
    assert fire(token, {"a": 1}).status_code == 200


@pytest.mark.parametrize(
    ("body", "raw", "status", "code"),
    [
        ({}, None, 400, "invalid_body"),
        ([1, 2], None, 400, "invalid_body"),
        ("text", None, 400, "invalid_body"),
        (None, b"", 400, "invalid_json"),
        (None, b"{not json", 400, "invalid_json"),
        (None, b'{"a": 1, "a": 2}', 400, "invalid_json"),
        (None, b'{"a": NaN}', 400, "invalid_json"),
        ({"a": "nul \u0000 inside"}, None, 400, "invalid_body"),
        (None, b'{"a": "\\ud800"}', 400, "invalid_body"),
    ],
)
def test_bad_bodies_are_refused_like_on_the_message_endpoint(client, trigger, body, raw, status, code):
    response = post(client, FIRE, trigger[1], body, raw=raw)
    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert not Message.objects.exists()
    made = WebhookTrigger.objects.get()
    assert made.fire_count == 0


def test_a_huge_body_is_413(client, trigger, settings):
    settings.INGEST_MAX_BODY_BYTES = 1000
    response = post(client, FIRE, trigger[1], {"blob": "x" * 2000})
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert not Message.objects.exists()


def test_a_body_that_is_not_json_is_415(client, trigger):
    response = post(client, FIRE, trigger[1], raw="a=1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert not Message.objects.exists()


def test_only_post(client, trigger):
    response = client.get(FIRE, headers={"Authorization": f"Bearer {trigger[1]}"})
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


def test_idempotency_key_makes_a_retry_safe(fire, trigger):
    first = fire(trigger[1], {"order": 7}, **{"Idempotency-Key": "order-7"})
    again = fire(trigger[1], {"order": 7}, **{"Idempotency-Key": "order-7"})
    changed = fire(trigger[1], {"order": 8}, **{"Idempotency-Key": "order-7"})
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert changed.status_code == 422
    assert Message.objects.filter(role=Role.USER).count() == 1
    record = IdempotencyRecord.objects.get()
    assert record.trigger == trigger[0] and record.api_key is None
    assert WebhookTrigger.objects.get().fire_count == 1


def test_the_same_idempotency_key_on_a_key_and_a_trigger_are_separate(fire, send, trigger, v2):
    assert send(v2[1], {"message": "hi"}, **{"Idempotency-Key": "k1"}).status_code == 200
    assert fire(trigger[1], {"a": 1}, **{"Idempotency-Key": "k1"}).status_code == 200
    assert Message.objects.filter(role=Role.USER).count() == 2


def test_a_trigger_has_its_own_rate_limit(fire, trigger, settings):
    settings.INGEST_RATE_LIMIT = "2/h"  # an hour: three requests never straddle a window turning over
    statuses = [fire(trigger[1], {"n": n}).status_code for n in range(3)]
    assert statuses == [200, 200, 429]
    limited = fire(trigger[1], {"n": 4})
    assert limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1
    assert limited["RateLimit-Policy"] == '"per-trigger";q=2;w=3600'
    assert Message.objects.filter(role=Role.USER).count() == 2


def test_wrong_tokens_count_towards_the_addresss_failure_limit(client, trigger, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "2/m"
    wrong = "Bearer pwh_" + "B" * 38
    statuses = [
        client.post(FIRE, data="{}", content_type="application/json", headers={"Authorization": wrong}).status_code
        for _ in range(3)
    ]
    assert statuses == [401, 401, 429]


# --- GitHub: signed instead of a token ---------------------------------------------------------------------------


def _github_signature(secret: str, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


@pytest.fixture
def signed(user):
    made, token, secret = services.create_trigger(user, "A push to the website", "Check the deploy", signed=True)
    assert secret is not None and secret.startswith("pws_")
    return made, token, secret


def test_a_signed_github_push_is_accepted_and_summarised(client, signed, django_capture_on_commit_callbacks):
    made, _, secret = signed
    raw = json.dumps(
        {
            "ref": "refs/heads/main",
            "repository": {"full_name": "sam/website"},
            "pusher": {"name": "sam"},
            "sender": {"login": "sam"},
            "commits": [{"id": "1"}, {"id": "2"}],
            "head_commit": {"message": "Fix the pricing table\n\nLonger text"},
        }
    ).encode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"{FIRE}/{made.public_id}", data=raw, content_type="application/json",
            headers={"X-Hub-Signature-256": _github_signature(secret, raw), "X-GitHub-Event": "push"},
        )  # fmt: skip
    assert response.status_code == 200, response.content
    text = Message.objects.get(role=Role.USER).text
    assert text.splitlines()[0] == "Check the deploy"
    assert "GitHub push to sam/website main: 2 commits by sam “Fix the pricing table”" in text


def test_a_wrong_or_missing_signature_is_401(client, signed):
    made, _, secret = signed
    raw = b'{"zen": "x"}'
    for signature in (_github_signature(secret, raw + b" "), _github_signature("pws_wrong", raw), "sha1=abc", ""):
        response = client.post(
            f"{FIRE}/{made.public_id}", data=raw, content_type="application/json",
            headers={"X-Hub-Signature-256": signature} if signature else {},
        )  # fmt: skip
        assert response.status_code == 401
    assert not Message.objects.exists()


def test_a_trigger_without_a_secret_refuses_signatures(client, trigger):
    made, _ = trigger
    raw = b'{"a": 1}'
    response = client.post(
        f"{FIRE}/{made.public_id}", data=raw, content_type="application/json",
        headers={"X-Hub-Signature-256": _github_signature("pws_" + "0" * 64, raw)},
    )  # fmt: skip
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_signature"


def test_a_github_ping_is_acknowledged_without_a_message(client, signed):
    made, _, secret = signed
    raw = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
    response = client.post(
        f"{FIRE}/{made.public_id}", data=raw, content_type="application/json",
        headers={"X-Hub-Signature-256": _github_signature(secret, raw), "X-GitHub-Event": "ping"},
    )  # fmt: skip
    assert response.status_code == 200
    assert "ping" in response.json()["message"]
    assert not Message.objects.exists()


def test_signing_secrets_survive_a_secret_key_rotation(settings, signed):
    made, _, secret = signed
    raw = b'{"a": 1}'
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-" + "y" * 40, [old]
    assert services.signature_matches(made, raw, _github_signature(secret, raw))
    settings.SECRET_KEY_FALLBACKS = []
    assert not services.signature_matches(made, raw, _github_signature(secret, raw))


def test_an_alertmanager_payload_is_summarised(fire, trigger):
    payload = {
        "version": "4", "status": "firing", "receiver": "my-assistant",
        "commonLabels": {"alertname": "CheckoutErrors", "severity": "critical"},
        "commonAnnotations": {"summary": "5xx rate over 5% for 10 minutes"},
        "alerts": [{"status": "firing", "labels": {"alertname": "CheckoutErrors"}}, {"status": "resolved"}],
    }  # fmt: skip
    assert fire(trigger[1], payload).status_code == 200
    text = Message.objects.get(role=Role.USER).text
    assert (
        "Alertmanager: 2 alerts (1 firing, 1 resolved): CheckoutErrors [critical]: “5xx rate over 5% for 10 minutes”"
        in text
    )


# --- making a trigger: bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"condition": "   ", "action": "Send me a summary"},
        {"condition": "When X", "action": ""},
        {"action": "Send me a summary"},
        {"condition": "When X"},
        {"condition": 5, "action": "Do"},
        {"condition": "When X", "action": ["Do"]},
        {"condition": "x" * 501, "action": "Do"},
        {"condition": "When X", "action": "Do", "signed": "yes"},
        {"condition": "When \u0000 X", "action": "Do"},
        [],
    ],
)
def test_a_bad_trigger_is_400_and_makes_nothing(client, v2, body):
    response = post(client, CREATE, v2[1], body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_body"
    assert not WebhookTrigger.objects.exists()


def test_making_a_trigger_needs_a_valid_v2_key(client, v1):
    assert post(client, CREATE, None, ORDER).status_code == 401
    assert post(client, CREATE, "psk_" + "x" * 38, ORDER).status_code == 401
    response = post(client, CREATE, v1[1], ORDER)
    assert response.status_code == 401
    assert response.json()["code"] == "wrong_key_generation"
    key, plaintext = make_key()
    revoke_key(key)
    assert post(client, CREATE, plaintext, ORDER).json()["code"] == "revoked_api_key"
    assert not WebhookTrigger.objects.exists()


def test_signed_true_returns_a_signing_secret_once(client, v2):
    body = post(client, CREATE, v2[1], {**ORDER, "signed": True}).json()
    assert body["signingSecret"].startswith("pws_")
    made = WebhookTrigger.objects.get()
    assert body["signingSecret"] not in json.dumps(list(WebhookTrigger.objects.values()), default=str)
    assert services.signing_secret(made) == body["signingSecret"]


def test_triggers_of_lists_the_active_ones(user, trigger):
    made, _ = trigger
    other, _, _ = services.create_trigger(user, "B", "b")
    services.revoke_trigger(other)
    assert services.triggers_of(user) == [made]


def test_deliveries_of_firings_carry_no_key(fire, trigger):
    fire(trigger[1], {"a": 1})
    assert Delivery.objects.get().api_key is None


def test_an_account_holds_at_most_max_active_triggers(client, v2, settings):
    settings.MAX_ACTIVE_TRIGGERS_PER_ACCOUNT = 2
    assert [post(client, CREATE, v2[1], ORDER).status_code for _ in range(3)] == [201, 201, 409]
    refused = post(client, CREATE, v2[1], ORDER).json()
    assert refused["code"] == "trigger_limit_reached" and "Revoke one" in refused["message"]
    assert WebhookTrigger.objects.count() == 2
    services.revoke_trigger(WebhookTrigger.objects.first())
    assert post(client, CREATE, v2[1], ORDER).status_code == 201  # a revoked one makes room


def test_a_signature_that_is_not_ascii_is_401_and_counts_as_a_failure(client, signed, settings):
    """hmac.compare_digest refuses str with non-ASCII characters: a 500 before, and not counted."""
    settings.AUTH_FAILURE_RATE_LIMIT = "2/m"
    made, _, _ = signed
    raw = b'{"zen": "x"}'
    statuses = []
    for _ in range(3):
        response = client.post(
            f"{FIRE}/{made.public_id}", data=raw, content_type="application/json",
            headers={"X-Hub-Signature-256": "sha256=" + "é" * 64},
        )  # fmt: skip
        statuses.append((response.status_code, response.json()["code"]))
    assert statuses == [(401, "invalid_signature"), (401, "invalid_signature"), (429, "rate_limited")]
    assert not Message.objects.exists()


def _deliver(client, made, secret, raw, delivery_id, event="push"):
    headers = {"X-Hub-Signature-256": _github_signature(secret, raw), "X-GitHub-Event": event}
    if delivery_id is not None:
        headers["X-GitHub-Delivery"] = delivery_id
    return client.post(f"{FIRE}/{made.public_id}", data=raw, content_type="application/json", headers=headers)


def test_a_replayed_github_delivery_is_acknowledged_without_a_second_message(client, signed, user):
    made, _, secret = signed
    raw = b'{"ref": "refs/heads/main", "after": "1a2b"}'

    first = _deliver(client, made, secret, raw, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    again = _deliver(client, made, secret, raw, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    new_id_same_body = _deliver(client, made, secret, raw, "0b4a5c1e-0000-11e3-81ab-4c9367dc0958")

    assert first.status_code == 200 and "id" in first.json()
    for repeat in (again, new_id_same_body):
        assert repeat.status_code == 200
        assert repeat.json()["success"] is True
        assert "received before" in repeat.json()["message"]
    assert Message.objects.filter(role=Role.USER).count() == 1
    made.refresh_from_db()
    assert made.fire_count == 1


def test_a_delivery_id_counts_per_trigger_and_new_deliveries_go_on(client, signed, user):
    made, _, secret = signed
    other, _, other_secret = services.create_trigger(user, "Another repository", "Check it", signed=True)
    raw = b'{"after": "1"}'
    assert "id" in _deliver(client, made, secret, raw, "same-id").json()
    assert "id" in _deliver(client, other, other_secret, raw, "same-id").json()  # another trigger: its own record
    assert "id" in _deliver(client, made, secret, b'{"after": "2"}', "next-id").json()
    assert Message.objects.filter(role=Role.USER).count() == 3


def test_old_delivery_records_are_pruned(client, signed, settings):
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from triggers.models import ReceivedDelivery

    made, _, secret = signed
    _deliver(client, made, secret, b'{"after": "1"}', "old")
    _deliver(client, made, secret, b'{"after": "2"}', "recent")
    ReceivedDelivery.objects.filter(fingerprint__in=services.delivery_fingerprints("old", b'{"after": "1"}')).update(
        received_at=timezone.now() - timedelta(seconds=settings.TRIGGER_DELIVERY_RETENTION_SECONDS + 60)
    )

    call_command("prunetriggerdeliveries", stdout=open("/dev/null", "w"))  # noqa: SIM115

    left = set(ReceivedDelivery.objects.values_list("fingerprint", flat=True))
    assert left == set(services.delivery_fingerprints("recent", b'{"after": "2"}'))
