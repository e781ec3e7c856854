"""Requests an attacker (or a careless script) would send: odd, repeated or missing headers, lying Content-Length,
chunked bodies, JSON that parsers read differently, numbers and text at the edges. Each gets its status and code in
the error shape, and nothing is recorded; the odd-but-valid ones are stored exactly."""

import pytest

from conversations.models import Message
from tests.conftest import CURRENT, post
from tests.test_body_properties import as_json_numbers

pytestmark = pytest.mark.django_db


def assert_refused(response, status: int, code: str, fragment: str = "") -> None:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error = response.json()
    assert (error["success"], error["code"]) == (False, code)
    assert fragment in error["message"]
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("raw", "code", "fragment"),
    [
        ('{"message": "pay Sam", "message": "pay Mallory"}', "invalid_json", '"message" appears more than once'),
        ('{"message": "hi", "a": {"x": 1, "x": 2}}', "invalid_json", '"x" appears more than once'),
        ('\ufeff{"message": "hi"}', "invalid_json", "BOM"),
        ('{"message": "hi"} {"message": "again"}', "invalid_json", "Extra data"),
        ('{"message": "hi"}x', "invalid_json", "Extra data"),
        ('{"message": "a\x00b"}', "invalid_json", "control character"),
        ("{'message': 'hi'}", "invalid_json", "property name"),
        ('{"message": "hi" /* comment */}', "invalid_json", "line 1"),
        ('{"message": "\\uDEAD"}', "invalid_body", "surrogate"),
        ('{"message": "\\u3000\\u2003"}', "invalid_body", "blank"),  # only Unicode spaces
        ('{"message": "hi", "n": -Infinity}', "invalid_json", "Infinity"),
        # Valid JSON, but longer than Python converts: said plainly, without Python's own advice (issue 18 item 18).
        ('{"message": "hi", "n": 1' + "0" * 4400 + "}", "invalid_body", "longer than 4300 digits"),
        ('{"message": "hi", "deep": ' + '{"a": ' * 70 + "1" + "}" * 70 + "}", "invalid_body", "nested"),
    ],
)
def test_json_that_parsers_disagree_on_or_cannot_store_is_refused(client, v2, raw, code, fragment):
    assert_refused(post(client, CURRENT, v2[1], raw=raw.encode("utf-8", "surrogatepass")), 400, code, fragment)


@pytest.mark.parametrize(
    "body",
    [
        {"message": "😀 مرحبا \u202eevil\u202c zero\u200bwidth e\u0301"},  # emoji, RTL override, zero-width, combining
        {"message": "hi", "__proto__": {"admin": True}, "constructor": "x"},
        {"message": "'; DROP TABLE conversations_message; --"},
        {"message": "hi", "big": 10**300, "small": -(10**300), "tiny": 5e-324, "neg_zero": -0.0},
        {"message": "hi", "members": {str(n): n for n in range(2000)}},
        {"message": "x" * 100_000},
        {"message": "hi", "": "empty name", " ": "space name"},
        {"message": "<script>alert(1)</script>"},
    ],
)
def test_odd_but_valid_bodies_are_stored_exactly(client, v2, body):
    response = post(client, CURRENT, v2[1], body)
    assert response.status_code == 200, response.content[:300]
    stored = Message.objects.get()
    assert as_json_numbers(stored.context) == as_json_numbers(body)  # -0.0 comes back from jsonb as 0.0


@pytest.mark.parametrize("declared", ["abc", "-1", "", "1e3", "0x10"])
def test_a_content_length_that_is_not_a_number_means_no_body(client, v2, declared):
    response = client.post(
        CURRENT, data='{"message": "hi"}', content_type="application/json",
        headers={"Authorization": f"Bearer {v2[1]}"}, CONTENT_LENGTH=declared,
    )  # fmt: skip
    assert_refused(response, 400, "invalid_json")  # the body is not read without a usable length


def test_a_huge_declared_content_length_is_refused_before_reading(client, v2):
    response = client.post(
        CURRENT, data='{"message": "hi"}', content_type="application/json",
        headers={"Authorization": f"Bearer {v2[1]}"}, CONTENT_LENGTH="99999999999999999999",
    )  # fmt: skip
    assert_refused(response, 413, "payload_too_large")


def test_a_chunked_body_without_content_length_is_411(client, v2):
    response = client.post(
        CURRENT, data='{"message": "hi"}', content_type="application/json",
        headers={"Authorization": f"Bearer {v2[1]}", "Transfer-Encoding": "chunked"}, CONTENT_LENGTH="",
    )  # fmt: skip
    assert_refused(response, 411, "length_required", "Content-Length")


@pytest.mark.parametrize(
    "content_type",
    ["", "application/jsonx", "application/json-patch+json", "text/json", "application/x-www-form-urlencoded"],
)
def test_content_types_that_are_not_json_are_415(client, v2, content_type):
    response = post(client, CURRENT, v2[1], raw='{"message": "hi"}', content_type=content_type)
    assert_refused(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "application/json; charset=UTF-8", "application/json;charset=utf8"]
)
def test_json_content_types_in_any_case_are_accepted(client, v2, content_type):
    assert post(client, CURRENT, v2[1], raw='{"message": "hi"}', content_type=content_type).status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer {key}, Bearer {key}",  # a repeated header, as WSGI servers join them
        "Bearer {key}\r\nX-Injected: 1",
        "Bearer " + "A" * 8000,
        "Bearer psk_\u00e9\u00e9\u00e9",
        "Bearer\u00a0{key}",  # a no-break space instead of a space
        "bearer  ",
    ],
)
def test_odd_authorization_headers_are_401_never_500(client, v2, authorization):
    response = post(client, CURRENT, None, {"message": "hi"}, Authorization=authorization.format(key=v2[1]))
    assert response.status_code == 401
    assert response.json()["code"] in {"malformed_authorization", "invalid_api_key"}
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "request_id",
    ["abc\r\nSet-Cookie: session=evil", "x" * 129, "caf\u00e9", "<script>", "a b", ""],
)
def test_an_unsafe_request_id_is_replaced_never_echoed(client, v2, request_id):
    response = post(client, CURRENT, v2[1], {"message": "hi"}, **{"X-Request-ID": request_id})
    assert response.status_code == 200
    assert response["X-Request-ID"] != request_id
    assert len(response["X-Request-ID"]) == 32


def test_an_idempotency_key_with_a_line_break_is_400(client, v2):
    response = post(client, CURRENT, v2[1], {"message": "hi"}, **{"Idempotency-Key": "a\r\nX-Injected: 1"})
    assert_refused(response, 400, "invalid_idempotency_key")


def test_the_query_string_is_ignored(client, v2):
    response = client.post(
        CURRENT + "?message=from-the-url&success=false", data={"message": "from the body"},
        content_type="application/json", headers={"Authorization": f"Bearer {v2[1]}"},
    )  # fmt: skip
    assert response.status_code == 200
    assert Message.objects.get().context == {"message": "from the body"}


@pytest.mark.parametrize(
    ("accept", "query"),
    [("text/html", ""), ("application/xml", ""), ("text/plain;q=1, application/json;q=0", ""), ("", "?format=xml")],
)
def test_the_answer_is_json_whatever_the_client_accepts(client, v2, accept, query):
    # A browser extension or a monitoring hook may send its own Accept; the API speaks JSON only, so it answers
    # JSON rather than 406 (or, for ?format=, a 404 that says the endpoint does not exist).
    response = client.post(
        CURRENT + query, data={"message": "hi"}, content_type="application/json",
        headers={"Authorization": f"Bearer {v2[1]}", "Accept": accept},
    )  # fmt: skip
    assert response.status_code == 200, response.content[:200]
    assert response["Content-Type"] == "application/json"
    assert response.json()["id"] == Message.objects.get().public_id


def test_a_receipt_is_json_whatever_the_client_accepts(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    headers = {"Authorization": f"Bearer {v2[1]}", "Accept": "text/html"}
    response = client.get(f"/api/v1/inbound/messages/{message_id}?format=xml", headers=headers)
    assert (response.status_code, response.json()["id"]) == (200, message_id)


@pytest.mark.parametrize("path", [CURRENT, "/api/v1/inbound/messages/msg_" + "a" * 24, "/api/nowhere"])
def test_a_host_this_server_does_not_serve_is_a_json_400(client, v2, path):
    # Django refuses it before any view (DisallowedHost); under /api/ the refusal is JSON too, never the HTML page.
    response = post(client, path, v2[1], {"message": "hi"}, Host="evil.example")
    assert_refused(response, 400, "bad_request", "Host")


def test_the_404_handler_answers_under_api_like_an_unknown_api_path(client, rf):
    from config.errors import not_found

    handled = not_found(rf.get("/api/v1/inbound/messages/"))
    unknown = client.get("/api/v1/nowhere")
    assert (handled.status_code, handled["Content-Type"]) == (404, "application/json")
    assert handled.content == unknown.content
