"""A webhook trigger's delivery log (ingestion/trigger_log.py): every request to its URL that can be told apart as
its own leaves a line: accepted (with its message), duplicate, ping, or refused with the code it was answered; a flood
of refusals is one line with a count; the log keeps LOG_LENGTH lines and refusals never more than REFUSALS_KEPT."""

import hashlib
import hmac
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingestion import trigger_log
from ingestion.models import FiringOutcome, TriggerFiring
from tests.conftest import post
from tests.factories import make_key
from triggers import services

pytestmark = pytest.mark.django_db

PUSH = {
    "ref": "refs/heads/main",
    "repository": {"full_name": "acme/shop"},
    "pusher": {"name": "sam"},
    "commits": [{"id": "4f2c"}],
    "head_commit": {"message": "Fix the checkout"},
}


@pytest.fixture
def trigger(user):
    made, token, secret = services.create_trigger(user, "A deploy fails", "Tell me which commit", signed=True)
    return made, token, secret


def url(trigger) -> str:
    return f"/api/v1/inbound/webhook/{trigger.public_id}"


def lines(trigger) -> list[TriggerFiring]:
    return list(TriggerFiring.objects.filter(trigger=trigger).order_by("-id"))


def only_line(trigger) -> TriggerFiring:
    found = lines(trigger)
    assert len(found) == 1, found
    return found[0]


def sign(secret: str, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def test_an_accepted_firing_is_logged_with_its_message_and_a_summary(client, trigger):
    made, token, _ = trigger
    response = post(client, url(made), token, PUSH, **{"X-GitHub-Event": "push"})

    assert response.status_code == 200
    line = only_line(made)
    assert line.outcome == FiringOutcome.ACCEPTED and line.code == "" and line.count == 1
    assert line.message.public_id == response.json()["id"]
    assert line.summary == "GitHub push to acme/shop main: 1 commit by sam “Fix the checkout”"


def test_an_unknown_senders_payload_is_summarised_by_its_member_names_only(client, trigger):
    made, token, _ = trigger
    post(client, url(made), token, {"order": 1042, "card_token": "tok_SECRET", "total": "€38.50"})

    line = only_line(made)
    assert line.summary == "JSON object: order, card_token, total"
    assert "SECRET" not in line.summary and "38.50" not in line.summary


def test_the_token_only_url_logs_an_accepted_firing_too(client, trigger):
    made, token, _ = trigger
    assert post(client, "/api/v1/inbound/webhook", token, {"order": 1}).status_code == 200
    assert only_line(made).outcome == FiringOutcome.ACCEPTED


def test_a_repeated_github_delivery_is_logged_as_a_duplicate(client, trigger):
    made, token, _ = trigger
    for _ in range(2):
        assert post(client, url(made), token, PUSH, **{"X-GitHub-Delivery": "d-1"}).status_code == 200

    accepted, duplicate = sorted(lines(made), key=lambda line: line.pk)
    assert accepted.outcome == FiringOutcome.ACCEPTED
    assert (duplicate.outcome, duplicate.message, duplicate.code) == (FiringOutcome.DUPLICATE, None, "")
    assert duplicate.summary.startswith("GitHub push to acme/shop")


def test_an_idempotency_key_replay_is_logged_as_a_duplicate(client, trigger):
    made, token, _ = trigger
    for _ in range(2):
        post(client, url(made), token, {"order": 1}, **{"Idempotency-Key": "k-1"})
    assert [line.outcome for line in lines(made)] == [FiringOutcome.DUPLICATE, FiringOutcome.ACCEPTED]


def test_githubs_ping_is_logged(client, trigger):
    made, token, _ = trigger
    ping = {"zen": "Keep it logically awesome.", "repository": {"full_name": "acme/shop"}}
    post(client, url(made), token, ping, **{"X-GitHub-Event": "ping"})
    line = only_line(made)
    assert (line.outcome, line.message) == (FiringOutcome.PING, None)
    assert line.summary == "GitHub ping for acme/shop: “Keep it logically awesome.”"


def _wrong_token(client, made, token, secret):
    return post(client, url(made), services.TOKEN_PREFIX + "x" * 38, {"order": 1})


def _another_triggers_token(client, made, token, secret):
    _, other_token, _ = services.create_trigger(made.owner, "Other", "Other")
    return post(client, url(made), other_token, {"order": 1})


def _an_api_key(client, made, token, secret):
    return post(client, url(made), make_key(made.owner, "ci")[1], {"order": 1})


def _no_authorization(client, made, token, secret):
    return post(client, url(made), None, {"order": 1})


def _wrong_signature(client, made, token, secret):
    raw = json.dumps(PUSH).encode()
    return post(client, url(made), raw=raw, **{"X-Hub-Signature-256": sign("pws_wrong", raw)})


def _revoked(client, made, token, secret):
    services.revoke_trigger(made)
    return post(client, url(made), token, {"order": 1})


def _account_inactive(client, made, token, secret):
    made.owner.is_active = False
    made.owner.save()
    return post(client, url(made), token, {"order": 1})


def _bad_json(client, made, token, secret):
    return post(client, url(made), token, raw=b'{"order": ')


def _empty_object(client, made, token, secret):
    return post(client, url(made), token, {})


def _too_large(client, made, token, secret):
    return post(client, url(made), token, {"order": "x" * 2_000_000})


def _idempotency_key_reused(client, made, token, secret):
    post(client, url(made), token, {"order": 1}, **{"Idempotency-Key": "k-1"})
    TriggerFiring.objects.all().delete()
    return post(client, url(made), token, {"order": 2}, **{"Idempotency-Key": "k-1"})


def _rate_limited(client, made, token, secret):
    for number in range(2):  # the test's INGEST_RATE_LIMIT
        post(client, url(made), token, {"order": number})
    TriggerFiring.objects.all().delete()
    return post(client, url(made), token, {"order": 2})


def _not_a_post(client, made, token, secret):
    return client.get(url(made), headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(
    ("send", "code"),
    [
        (_wrong_token, "invalid_webhook_token"),
        (_another_triggers_token, "invalid_webhook_token"),
        (_an_api_key, "invalid_webhook_token"),
        (_no_authorization, "missing_authorization"),
        (_wrong_signature, "invalid_signature"),
        (_revoked, "revoked_webhook_trigger"),
        (_account_inactive, "account_disabled"),
        (_bad_json, "invalid_json"),
        (_empty_object, "invalid_body"),
        (_too_large, "payload_too_large"),
        (_idempotency_key_reused, "idempotency_key_reused"),
        (_rate_limited, "rate_limited"),
        (_not_a_post, "method_not_allowed"),
    ],
    ids=lambda value: value.__name__.strip("_") if callable(value) else None,
)
def test_each_refusal_is_logged_with_its_code(client, trigger, settings, send, code):
    settings.INGEST_RATE_LIMIT = "2/m"
    made, token, secret = trigger
    response = send(client, made, token, secret)

    assert response.status_code >= 400 and response.json()["code"] == code
    line = only_line(made)
    assert (line.outcome, line.code, line.message, line.count) == (FiringOutcome.REFUSED, code, None, 1)
    assert line.summary == ""  # nothing of a refused request's body


def test_the_log_holds_no_token_or_signature(client, trigger):
    made, token, secret = trigger
    raw = json.dumps(PUSH).encode()
    post(client, url(made), raw=raw, **{"X-Hub-Signature-256": sign(secret, raw), "X-GitHub-Event": "push"})
    post(client, url(made), raw=raw, **{"X-Hub-Signature-256": sign(secret, raw + b" ")})
    post(client, url(made), token[:-1] + ("1" if token.endswith("0") else "0"), {"order": 1})

    stored = json.dumps(list(TriggerFiring.objects.values()), default=str)
    assert [line.outcome for line in lines(made)] == [FiringOutcome.REFUSED] * 2 + [FiringOutcome.ACCEPTED]
    for secret_part in (token, token[:-1], secret, sign(secret, raw).removeprefix("sha256=")):
        assert secret_part not in stored


@pytest.mark.parametrize("send", [_revoked, _account_inactive], ids=["revoked", "account_inactive"])
def test_a_right_token_refused_on_the_token_only_url_is_logged_too(client, trigger, send):
    made, token, secret = trigger
    refused = send(client, made, token, secret)  # on the trigger's own URL
    TriggerFiring.objects.all().delete()
    trigger_log.cache.clear()

    again = post(client, "/api/v1/inbound/webhook", token, {"order": 1})

    assert again.json()["code"] == refused.json()["code"]
    assert only_line(made).code == refused.json()["code"]


def test_requests_that_name_no_trigger_are_not_logged(client, trigger):
    _, token, _ = trigger
    post(client, "/api/v1/inbound/webhook", services.TOKEN_PREFIX + "x" * 38, {"order": 1})
    post(
        client,
        "/api/v1/inbound/webhook/trg_" + "0" * 20,
        token[:-1] + ("1" if token.endswith("0") else "0"),
        {"order": 1},
    )
    post(client, "/api/v1/inbound/webhook/trg_short", token, {"order": 1})
    assert not TriggerFiring.objects.exists()


def test_a_flood_of_bad_tokens_is_one_line_with_its_count_and_few_writes(client, trigger, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "10000/m"
    made, _, _ = trigger
    with CaptureQueriesContext(connection) as queries:
        for number in range(300):
            response = post(client, url(made), f"{services.TOKEN_PREFIX}{number:038d}", {"order": 1})
            assert response.json()["code"] == "invalid_webhook_token"

    line = only_line(made)
    assert (line.outcome, line.code) == (FiringOutcome.REFUSED, "invalid_webhook_token")
    assert trigger_log.live_counts([line]) == {line.pk: 300}
    table = TriggerFiring._meta.db_table
    sql = [query["sql"] for query in queries.captured_queries]
    writes = [text for text in sql if table in text and not text.startswith("SELECT")]
    # The line's INSERT, its trims, and at most one update of its count per FLUSH_SECONDS.
    assert len(writes) <= 4, [text[:80] for text in writes]
    # Nor does it look the trigger up for each: the requests' own lookups are by token digest.
    lookups = [text for text in sql if "public_id" in text and text.startswith("SELECT")]
    assert len(lookups) <= 1


def test_a_coalesced_lines_count_reaches_the_database(trigger):
    made, _, _ = trigger
    for _ in range(3):
        trigger_log.note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")
    trigger_log.cache.delete(f"trglog:flush:{only_line(made).pk}")  # as FLUSH_SECONDS passing does
    trigger_log.note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")

    line = only_line(made)
    assert line.count == 4 and line.last_at > line.at


def test_a_refusal_of_another_kind_or_after_the_window_is_a_line_of_its_own(trigger):
    made, _, _ = trigger
    note = trigger_log.note
    note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")
    note(FiringOutcome.REFUSED, public_id=made.public_id, code="missing_authorization")
    note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")
    assert len(lines(made)) == 2
    trigger_log.cache.clear()  # COALESCE_SECONDS passed
    note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")
    newest_first = ["invalid_webhook_token", "missing_authorization", "invalid_webhook_token"]
    assert [line.code for line in lines(made)] == newest_first


@pytest.mark.slow
def test_the_log_keeps_the_last_100_firings(client, trigger, settings):
    settings.RATELIMIT_ENABLE = False
    made, token, _ = trigger
    for number in range(trigger_log.LOG_LENGTH + 5):
        assert post(client, url(made), token, {"order": number}).status_code == 200

    kept = lines(made)
    assert len(kept) == trigger_log.LOG_LENGTH
    assert [line.message.context["order"] for line in kept] == list(range(104, 4, -1))


@pytest.mark.slow
def test_refusals_cannot_push_the_real_firings_out_of_the_log(client, trigger, settings):
    settings.RATELIMIT_ENABLE = False
    made, token, _ = trigger
    for number in range(60):
        post(client, url(made), token, {"order": number})
    for _ in range(3 * trigger_log.LOG_LENGTH):
        trigger_log.cache.clear()  # each refusal after the coalescing window: a line each
        trigger_log.note(FiringOutcome.REFUSED, public_id=made.public_id, code="invalid_webhook_token")

    kept = lines(made)
    refused = [line for line in kept if line.outcome == FiringOutcome.REFUSED]
    accepted = [line for line in kept if line.outcome == FiringOutcome.ACCEPTED]
    assert len(kept) == trigger_log.LOG_LENGTH
    assert len(refused) == trigger_log.REFUSALS_KEPT
    assert [line.message.context["order"] for line in accepted] == list(range(59, 9, -1))


def test_a_blocked_address_flooding_random_trigger_ids_costs_the_database_nothing(client, trigger, settings):
    """Once the failed-authentication limit blocks an address, its requests cost no query (the limit's point): a
    request that only names a trigger in its URL is not logged then, so many random ids cannot each cost a lookup
    and a cache entry. The requests counted before the block are on the named trigger's line."""
    settings.AUTH_FAILURE_RATE_LIMIT = "5/m"
    made, _, _ = trigger
    for _ in range(5):
        assert post(client, url(made), "x", {"order": 1}).json()["code"] == "invalid_webhook_token"
    random_ids = [f"trg_{number:020d}" for number in range(50)]
    with CaptureQueriesContext(connection) as queries:
        for trigger_id in [*random_ids, made.public_id]:
            response = post(client, f"/api/v1/inbound/webhook/{trigger_id}", "x", {"order": 1})
            assert response.json()["code"] == "rate_limited"

    assert queries.captured_queries == []
    line = only_line(made)
    assert line.code == "invalid_webhook_token" and trigger_log.live_counts([line]) == {line.pk: 5}
    assert not any(trigger_log.cache.get(f"trglog:open:{trigger_id}:refused:rate_limited") for trigger_id in random_ids)


@pytest.mark.parametrize("event", ["\x00", "ping\x00", "push\x1b[2J"])
def test_a_github_event_header_with_control_characters_is_recorded_without_them(client, trigger, event):
    """The header is the sender's text, unchecked by the body's rules: a NUL in it (which PostgreSQL cannot store)
    was a 500, and an escape sequence went into the message and the log as it came."""
    made, token, _ = trigger
    response = post(client, url(made), token, PUSH, **{"X-GitHub-Event": event})

    assert response.status_code == 200, response.content
    line = only_line(made)
    assert line.outcome == FiringOutcome.ACCEPTED and "GitHub" in line.summary
    for text in (line.summary, line.message.text):
        assert "\x00" not in text and "\x1b" not in text
