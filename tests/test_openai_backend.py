"""ASSISTANT_BACKEND=openai against a real local HTTP server speaking the chat-completions protocol."""

import threading

import pytest

from conversations.models import Delivery, DeliveryStatus, Role
from tests.factories import attempt_when_due

pytestmark = pytest.mark.django_db

API_KEY = "sk-test-0123456789abcdefghijklmnop"


def completion(content) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "llama3.2",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }


@pytest.fixture
def llm(settings, assistant_server):
    settings.ASSISTANT_BACKEND = "openai"
    settings.OPENAI_BASE_URL = assistant_server.url + "/v1/"
    settings.OPENAI_API_KEY = API_KEY
    settings.OPENAI_MODEL = "llama3.2"
    settings.ASSISTANT_SYSTEM_PROMPT = "You are a test assistant."
    settings.ASSISTANT_TIMEOUT_SECONDS = 2  # a slow answer is held (servers.Answer.hold), never raced
    return assistant_server


def delivery() -> Delivery:
    return Delivery.objects.select_related("reply").get()


def delivery_of_last() -> Delivery:
    return Delivery.objects.select_related("reply").order_by("-pk").first()


def test_it_sends_the_system_prompt_and_the_thread_and_records_the_reply(send, llm, v2):
    llm.answer(200, completion("Noted: stretch at 3pm."))
    llm.answer(200, completion("Done: the deploy report is filed."))
    send(v2[1], {"message": "Remind me to stretch at 3pm"})
    send(v2[1], {"message": "Deploy finished", "env": "prod", "sha": "abc123"})

    received = llm.received[1]
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {API_KEY}"
    request = received.json()
    assert request["model"] == "llama3.2"
    messages = request["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("You are a test assistant.")
    assert messages[1:3] == [
        {"role": "user", "content": "Remind me to stretch at 3pm"},
        {"role": "assistant", "content": "Noted: stretch at 3pm."},
    ]
    assert messages[3]["role"] == "user"
    assert messages[3]["content"].startswith("Deploy finished")
    assert '"sha": "abc123"' in messages[3]["content"]  # the rest of the body goes along as context
    assert delivery_of_last().reply.text == "Done: the deploy report is filed."
    assert delivery_of_last().reply.role == Role.ASSISTANT


def test_after_a_switch_from_the_local_assistant_its_replies_are_left_out_of_the_model_s_history(
    send, llm, v2, settings
):
    settings.ASSISTANT_BACKEND = "local"
    send(v2[1], {"message": "Water the plants at 6pm"})
    local_reply = delivery_of_last().reply.text
    settings.ASSISTANT_BACKEND = "openai"
    llm.answer(200, completion("Watering set for 6pm."))
    send(v2[1], {"message": "And feed the cat"})

    messages = llm.received[0].json()["messages"]
    assert local_reply not in [message["content"] for message in messages]
    assert messages[1:] == [
        {"role": "user", "content": "Water the plants at 6pm"},
        {"role": "user", "content": "And feed the cat"},
    ]


def test_the_history_a_model_sees_starts_with_a_user_turn(send, llm, v2, settings):
    settings.ASSISTANT_THREAD_MESSAGES = 4  # the window cuts between a message and its reply
    for number in range(3):
        llm.answer(200, completion(f"Reply {number}"))
        send(v2[1], {"message": f"Message {number}"})

    window = [(message["role"], message["content"]) for message in llm.received[2].json()["messages"][1:]]
    # The last four messages were: Reply 0, Message 1, Reply 1, Message 2; the reply without its question goes.
    assert window == [("user", "Message 1"), ("assistant", "Reply 1"), ("user", "Message 2")]


def test_no_authorization_header_without_a_key(send, llm, v2, settings):
    settings.OPENAI_API_KEY = ""  # a local Ollama or llama.cpp server needs none
    llm.answer(200, completion("hi"))
    send(v2[1], {"message": "hi"})
    assert "authorization" not in llm.received[0].headers
    assert delivery().status == DeliveryStatus.DELIVERED


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors_and_rate_limits_are_retried(send, llm, v2, status):
    llm.answer(status, {"error": {"message": "overloaded", "type": "server_error"}})
    llm.answer(200, completion("there you are"))
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.QUEUED
    assert f"HTTP {status}: overloaded" in delivery().last_error
    attempt_when_due(delivery().pk)
    assert (delivery().status, delivery().attempts) == (DeliveryStatus.DELIVERED, 2)


def test_a_timeout_is_retried(send, llm, v2):
    answer_now = threading.Event()
    llm.answer(200, completion("slow"), hold=answer_now)  # answers only when released (or after 10 s)
    try:
        send(v2[1], {"message": "hi"})
        assert delivery().status == DeliveryStatus.QUEUED
        assert delivery().last_error == "No response within 2 seconds."
    finally:
        answer_now.set()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (401, {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}),
        (404, {"error": "model 'llama3.2' not found"}),
        (400, b"bad request"),
    ],
)
def test_client_errors_fail_at_once_and_never_record_the_key(send, llm, v2, status, body):
    llm.answer(status, body)
    send(v2[1], {"message": "hi"})

    assert (delivery().status, delivery().attempts) == (DeliveryStatus.FAILED, 1)
    assert f"HTTP {status}" in delivery().last_error
    assert API_KEY not in delivery().last_error


def test_the_ollama_error_shape_is_shown_to_staff(send, llm, v2):
    llm.answer(404, {"error": "model 'llama3.2' not found"})
    send(v2[1], {"message": "hi"})
    assert "model 'llama3.2' not found" in delivery().last_error


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        {"choices": []},
        {"object": "chat.completion"},
        completion(None),
        completion(""),
        completion(["a"]),
        {"choices": [{"message": "text"}]},
        completion("a\u0000b"),
        completion("\ud800 hi"),
    ],
)
def test_a_malformed_completion_fails_the_delivery(send, llm, v2, body):
    llm.answer(200, body)
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.FAILED
    assert delivery().reply is None
    assert "chat-completions API" in delivery().last_error


@pytest.mark.parametrize(
    "setting",
    [
        ("OPENAI_API_KEY", API_KEY + "\r\nX-Injected: 1"),  # http.client refuses it, quoting the header's value
        ("OPENAI_BASE_URL", f"example.com/v1?key={API_KEY}"),  # no scheme: urllib refuses it, quoting the URL
    ],
)
def test_a_request_that_cannot_be_built_fails_without_the_key_in_the_log_or_the_delivery(
    send, llm, v2, settings, caplog, setting
):
    name, value = setting
    setattr(settings, name, value)
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.FAILED
    assert API_KEY not in delivery().last_error
    assert API_KEY not in caplog.text
    assert not llm.received


def test_an_error_text_with_control_characters_is_kept_printable(send, llm, v2):
    # PostgreSQL cannot store a NUL: left in, it made recording the failure itself fail, and the delivery hung.
    llm.answer(400, {"error": {"message": "bad\u0000request\u001b[31m here"}})
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.FAILED
    assert delivery().last_error.endswith("HTTP 400: bad request [31m here")
