"""`poke login`'s server side (RFC 8628 device authorization) and the /device page, with Django's test client;
tests/browser/test_poke_cli.py runs the real CLI against a live server."""

from datetime import timedelta

import pytest
from django.utils import timezone

from devices import services
from devices.models import DeviceAuthorization, Status
from keys.models import ApiKey, Generation
from keys.services import revoke_key
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CODE = "/api/v1/cli-auth/code"
POLL = "/api/v1/cli-auth/poll/"
PROFILE = "/api/v1/user/profile"


def start(client, **headers):
    response = client.post(CODE, headers={"User-Agent": "node", **headers})
    assert response.status_code == 200, response.content
    return response.json()


def poll(client, device_code):
    return client.get(POLL + device_code)


@pytest.fixture(autouse=True)
def _back_to_back_polls(settings):
    """Most tests here poll back to back; pacing per device code (slow_down) is tested on its own below."""
    settings.CLI_AUTH_POLL_MIN_SECONDS = 0


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_a_code_has_what_the_cli_and_rfc_8628_need(client):
    body = start(client)
    assert body["deviceCode"].startswith("pdc_") and len(body["deviceCode"]) == 42  # 190 random bits
    assert len(body["userCode"]) == 9 and body["userCode"][4] == "-"
    assert set(body["userCode"].replace("-", "")) <= set(services.USER_CODE_ALPHABET)
    assert body["verificationUri"] == "http://testserver/device"
    assert body["verificationUriComplete"] == f"http://testserver/device?code={body['userCode']}"
    assert (body["expiresIn"], body["interval"]) == (600, 2)
    stored = DeviceAuthorization.objects.get()
    assert body["deviceCode"] not in str(stored.__dict__)  # only its digest is kept
    assert stored.client_name == "node" and stored.client_address == "127.0.0.1"


def test_pending_until_approved_then_the_token_exactly_once(client, signed_in, user):
    body = start(client)
    assert poll(client, body["deviceCode"]).json()["status"] == "pending"

    page = signed_in.get("/device", {"code": body["userCode"].lower().replace("-", " ")})
    assert page.status_code == 200
    assert b"node" in page.content and b"127.0.0.1" in page.content
    done = signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})
    assert done.status_code == 200 and b"Device logged in" in done.content

    first = poll(client, body["deviceCode"])
    assert first.status_code == 200
    assert first.json()["status"] == "authenticated"
    token = first.json()["token"]
    assert first["Cache-Control"] == "no-store"
    again = poll(client, body["deviceCode"])
    assert again.status_code == 400
    assert (again.json()["status"], again.json()["code"]) == ("invalid", "device_code_used")
    assert "token" not in again.json()

    key = ApiKey.objects.get()
    assert (key.owner, key.generation) == (user, Generation.V2)
    assert key.name == f"poke CLI (Node.js) log-in · {timezone.now():%Y-%m-%d}"
    profile = client.get(PROFILE, headers={"Authorization": f"Bearer {token}"})
    assert profile.status_code == 200
    assert profile.json()["email"] == user.email


def test_a_denied_log_in_stops_the_cli_and_issues_nothing(client, signed_in):
    body = start(client)
    done = signed_in.post("/device", {"code": body["userCode"], "decision": "deny"})
    assert b"Log-in denied" in done.content
    answer = poll(client, body["deviceCode"])
    assert answer.status_code == 400
    assert (answer.json()["status"], answer.json()["code"]) == ("invalid", "access_denied")
    assert not ApiKey.objects.exists()


def test_one_approval_only(client, signed_in):
    body = start(client)
    assert signed_in.post("/device", {"code": body["userCode"], "decision": "approve"}).status_code == 200
    other = UserFactory()
    signed_in.force_login(other)
    again = signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})
    assert again.status_code == 404
    assert DeviceAuthorization.objects.get().decided_by != other


def test_an_expired_code_is_expired_for_the_cli_and_the_page(client, signed_in):
    body = start(client)
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = poll(client, body["deviceCode"])
    assert (answer.status_code, answer.json()["status"], answer.json()["code"]) == (400, "expired", "expired_token")
    page = signed_in.get("/device", {"code": body["userCode"]})
    assert page.status_code == 404
    assert signed_in.post("/device", {"code": body["userCode"], "decision": "approve"}).status_code == 404
    assert not ApiKey.objects.exists()


def test_approved_but_expired_before_collection_hands_out_nothing(client, signed_in):
    body = start(client)
    signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert poll(client, body["deviceCode"]).json()["status"] == "expired"
    assert not ApiKey.objects.exists()


@pytest.mark.parametrize("device_code", ["pdc_" + "A" * 38, "nothing", "pdc_" + "x" * 200, "%00", "pdc_é" + "a" * 37])
def test_unknown_device_codes_are_invalid(client, device_code):
    start(client)
    answer = poll(client, device_code)
    assert answer.status_code == 404
    assert answer.json()["status"] == "invalid"
    assert answer.json()["code"] == "invalid_device_code"
    assert answer.json()["success"] is False


def test_a_checksum_valid_but_unknown_device_code_is_invalid(client):
    from keys import tokens

    assert poll(client, tokens.generate_checked("pdc_")).json()["code"] == "invalid_device_code"


def test_code_creation_is_limited_per_address(client, settings):
    settings.CLI_AUTH_CODE_RATE_LIMIT = "2/h"
    statuses = [client.post(CODE).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    limited = client.post(CODE)
    assert limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) > 0
    assert DeviceAuthorization.objects.count() == 2
    # Another address is not affected.
    assert client.post(CODE, REMOTE_ADDR="10.0.0.9").status_code == 200


def test_polling_is_limited_per_address_and_says_slow_down(client, settings):
    settings.CLI_AUTH_POLL_RATE_LIMIT = "3/m"
    body = start(client)
    statuses = [poll(client, body["deviceCode"]).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = poll(client, body["deviceCode"])
    assert (limited.json()["status"], limited.json()["code"]) == ("slow_down", "rate_limited")
    assert "Retry-After" in limited


def test_the_code_endpoint_takes_only_post_and_the_poll_only_get(client):
    assert client.get(CODE).status_code == 405
    body = start(client)
    assert client.post(POLL + body["deviceCode"]).status_code == 405


# --- the /device page ----------------------------------------------------------------------------------------------


def test_the_page_needs_a_log_in_and_comes_back_with_the_code(client):
    response = client.get("/device", {"code": "BCDF-GHJK"})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/device%3Fcode%3DBCDF-GHJK")


def test_the_page_asks_for_the_code_when_none_is_given(signed_in):
    page = signed_in.get("/device")
    assert page.status_code == 200
    assert b'name="code"' in page.content and b"Approve" not in page.content


@pytest.mark.parametrize("typed", ["ZZZZ-ZZZZ", "AEIO-U123", "short", "x" * 100, "BCDF-GHJK\u0000"])
def test_a_code_that_matches_nothing_says_so(client, signed_in, typed):
    start(client)
    page = signed_in.get("/device", {"code": typed})
    assert page.status_code == 404
    assert b"No log-in is waiting with this code" in page.content


def test_a_post_without_a_decision_or_csrf_changes_nothing(client, user):
    body = start(client)
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/device", {"code": body["userCode"], "decision": "approve"}).status_code == 403
    client.force_login(user)
    assert client.post("/device", {"code": body["userCode"], "decision": "maybe"}).status_code == 400
    assert DeviceAuthorization.objects.get().status == Status.PENDING


def test_guessing_codes_is_paused_per_address(client, signed_in, settings):
    settings.DEVICE_CODE_FAILURE_RATE_LIMIT = "3/15m"
    body = start(client)
    statuses = [signed_in.get("/device", {"code": f"BCDF-GHJ{c}"}).status_code for c in "BCD"]
    assert statuses == [404, 404, 429]
    # Blocked: even the right code waits until the window ends.
    assert signed_in.get("/device", {"code": body["userCode"]}).status_code == 429


def test_the_issued_key_is_listed_on_api_keys_and_revocable(client, signed_in):
    body = start(client)
    signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})
    token = poll(client, body["deviceCode"]).json()["token"]
    key = ApiKey.objects.get()
    listing = signed_in.get("/keys/")
    assert key.name.encode() in listing.content
    revoke_key(key)
    refused = client.get(PROFILE, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401


# --- profile -------------------------------------------------------------------------------------------------------


def test_profile_answers_for_v2_and_v1_keys(client, user, v2, v1):
    user.first_name, user.last_name = "Sam", "Rivera"
    user.save()
    for _, plaintext in (v2, v1):
        response = client.get(PROFILE, headers={"Authorization": f"Bearer {plaintext}"})
        assert response.status_code == 200
        assert response.json() == {"success": True, "id": user.pk, "name": "Sam Rivera", "email": user.email}


def test_profile_without_a_name_says_null_so_the_cli_falls_back_to_the_email(client, v2):
    assert client.get(PROFILE, headers={"Authorization": f"Bearer {v2[1]}"}).json()["name"] is None


@pytest.mark.parametrize("authorization", [None, "Bearer psk_" + "x" * 38, "Bearer pwh_" + "x" * 38, "Basic abc"])
def test_profile_refuses_anything_but_a_key(client, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.get(PROFILE, headers=headers)
    assert response.status_code == 401
    assert response.json()["success"] is False


def test_profile_is_get_only(client, v2):
    assert client.post(PROFILE, headers={"Authorization": f"Bearer {v2[1]}"}).status_code == 405


def test_the_device_code_never_reaches_the_logs(client, caplog):
    import logging

    from ops.redaction import RedactResetLinks, loggable_path

    body = start(client)
    with caplog.at_level(logging.INFO):
        poll(client, body["deviceCode"])
        logging.getLogger("django.request").error("Internal Server Error: %s", POLL + body["deviceCode"])
    assert body["deviceCode"] not in caplog.text
    assert "/api/v1/cli-auth/poll/<device_code>" in caplog.text
    assert loggable_path(POLL + body["deviceCode"]) == "/api/v1/cli-auth/poll/<device_code>"
    record = logging.LogRecord("x", logging.ERROR, "", 0, "GET %s failed", (POLL + body["deviceCode"] + "?a=1",), None)
    assert RedactResetLinks().filter(record) and body["deviceCode"] not in record.getMessage()


def test_prunedevicelogins_deletes_long_expired_requests_and_keeps_their_keys(client, signed_in):
    from django.core.management import call_command

    old = start(client)
    signed_in.post("/device", {"code": old["userCode"], "decision": "approve"})
    poll(client, old["deviceCode"])
    fresh = start(client, REMOTE_ADDR="10.0.0.2")
    DeviceAuthorization.objects.exclude(user_code=fresh["userCode"].replace("-", "")).update(
        expires_at=timezone.now() - timedelta(days=2)
    )
    call_command("prunedevicelogins", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert list(DeviceAuthorization.objects.values_list("user_code", flat=True)) == [fresh["userCode"].replace("-", "")]
    assert ApiKey.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_simultaneous_polls_after_approval_hand_out_one_token(user):
    """The token goes to exactly one poll, however many arrive at once (PostgreSQL: real concurrent transactions)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions need PostgreSQL (CI's second pass)")
    authorization, device_code = services.start("node", "127.0.0.1")
    assert services.approve(authorization, user)

    def one_poll(_: int) -> str:
        try:
            return services.poll(device_code).status
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(one_poll, range(8)))
    assert statuses.count("authenticated") == 1
    assert set(statuses) == {"authenticated", "used"}
    assert ApiKey.objects.count() == 1


def test_a_head_after_approval_does_not_spend_the_approval(client, signed_in):
    """A HEAD ran the GET: it created the key and returned no body, and the CLI's next GET got device_code_used."""
    body = start(client)
    signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})

    head = client.head(POLL + body["deviceCode"])

    assert head.status_code == 405
    assert ApiKey.objects.count() == 0
    collected = poll(client, body["deviceCode"])
    assert (collected.status_code, collected.json()["status"]) == (200, "authenticated")
    assert ApiKey.objects.count() == 1


def test_polls_faster_than_the_interval_are_told_to_slow_down(client, signed_in, settings):
    """RFC 8628 3.5: slow_down, per device code. The poke CLI polls every 2 s and goes on polling on any status it
    does not know, so it is never refused; a client polling in a loop gets no answer but slow_down."""
    settings.CLI_AUTH_POLL_MIN_SECONDS = 1.5
    body, other = start(client), start(client)
    assert poll(client, body["deviceCode"]).json()["status"] == "pending"

    fast = poll(client, body["deviceCode"])

    assert fast.status_code == 400
    assert (fast.json()["status"], fast.json()["code"]) == ("slow_down", "slow_down")
    assert fast.json()["interval"] == services.POLL_INTERVAL_SECONDS
    assert poll(client, other["deviceCode"]).json()["status"] == "pending"  # per device code, not per address

    signed_in.post("/device", {"code": body["userCode"], "decision": "approve"})
    assert poll(client, body["deviceCode"]).json()["status"] == "slow_down"  # the token is not handed to it either
    assert ApiKey.objects.count() == 0
    DeviceAuthorization.objects.update(last_polled_at=timezone.now() - timedelta(seconds=2))  # the CLI's 2 s later
    collected = poll(client, body["deviceCode"])
    assert (collected.status_code, collected.json()["status"]) == (200, "authenticated")
