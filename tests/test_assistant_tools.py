"""Tool calling in the openai backend: a scripted OpenAI-compatible server on 127.0.0.1 asks for tool calls; the
built-in tools and a real FastMCP server's tools answer them."""

import json

import pytest

from assistant.models import Action, FollowUpToken
from connections import services as connections
from conversations.models import Delivery, DeliveryStatus
from reminders.models import Reminder
from tests.mcp_server import SERVER_KEY, running_mcp_server

pytestmark = pytest.mark.django_db


def completion(content=None, tool_calls=None) -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}]}


def call(name, arguments, call_id="call_1") -> dict:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


@pytest.fixture
def llm(llm, settings):
    settings.ASSISTANT_TOOL_ROUNDS = 3
    return llm


@pytest.fixture
def tracker(v2):
    with running_mcp_server(require_key=True) as server:
        connections.add_connection(v2[0].owner, "Tracker", server.url, SERVER_KEY)
        yield server


def delivery() -> Delivery:
    return Delivery.objects.select_related("reply").order_by("-pk").first()


def tool_messages(request) -> list[dict]:
    return [m for m in request.json()["messages"] if m["role"] == "tool"]


def test_the_model_schedules_a_reminder_and_its_text_is_the_reply(send, llm, v2):
    v2[0].owner.profile.time_zone = "America/New_York"
    v2[0].owner.profile.save()
    llm.answer(200, completion(tool_calls=[call("schedule_reminder", {"text": "stretch", "when": "2099-01-05T15:00"})]))
    llm.answer(200, completion("Done: I will remind you to stretch at 3pm."))

    send(v2[1], {"message": "Remind me to stretch at 3pm on Jan 5 2099"})

    first = llm.received[0].json()
    names = {tool["function"]["name"] for tool in first["tools"]}
    assert {"schedule_reminder", "list_reminders", "cancel_reminder"} <= names
    assert "America/New_York" in first["messages"][0]["content"]
    reminder = Reminder.objects.get()
    assert (reminder.text, reminder.time_zone) == ("stretch", "America/New_York")
    assert reminder.next_due_at.isoformat() == "2099-01-05T20:00:00+00:00"  # 15:00 in New York
    second = llm.received[1].json()
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert tool_messages(llm.received[1])[0]["tool_call_id"] == "call_1"
    # What the model reads is what it may say to the person: the time in words, no id, no RRULE.
    assert tool_messages(llm.received[1])[0]["content"] == "Scheduled the reminder “stretch”: Mon, 5 Jan 2099, 15:00."
    assert delivery().reply.text == "Done: I will remind you to stretch at 3pm."
    action = Action.objects.get()
    assert (action.tool, action.arguments["text"], action.is_error) == ("schedule_reminder", "stretch", False)
    assert action.finished_at is not None and action.delivery == delivery()


def test_the_persons_mcp_tools_are_offered_and_called_with_the_connections_key(send, llm, v2, tracker):
    llm.answer(200, completion(tool_calls=[call("tracker__create_issue", {"title": "Flaky deploy"})]))
    llm.answer(200, completion("Opened issue #42."))

    send(v2[1], {"message": "File an issue about the flaky deploy"})

    offered = {tool["function"]["name"]: tool["function"] for tool in llm.received[0].json()["tools"]}
    assert offered["tracker__create_issue"]["description"].startswith("[Tracker] Open an issue")
    assert offered["tracker__create_issue"]["parameters"]["properties"]["title"]["type"] == "string"
    assert ("create_issue", {"title": "Flaky deploy", "body": ""}) in tracker.calls
    tool_call_request = next(h for h in tracker.requests if "x-poke-callback-token" in h)
    assert tool_call_request["authorization"] == f"Bearer {SERVER_KEY}"
    assert tool_call_request["x-poke-callback-url"].endswith("/api/v1/mcp/callback")
    assert tool_call_request["x-poke-callback-token"].startswith("pfu_")
    assert not FollowUpToken.objects.filter(digest=tool_call_request["x-poke-callback-token"]).exists()  # hashed
    assert tool_messages(llm.received[1])[0]["content"] == "Opened issue #42: Flaky deploy"
    action = Action.objects.get()
    assert (action.connection_name, action.tool, action.kind) == ("Tracker", "create_issue", "mcp")
    assert delivery().reply.text == "Opened issue #42."


def test_an_unknown_tool_and_broken_arguments_go_back_to_the_model_as_errors(send, llm, v2):
    llm.answer(
        200,
        completion(
            tool_calls=[
                call("send_email", {"to": "x"}, "call_a"),
                call("schedule_reminder", '{"text": "x", ', "call_b"),
            ]
        ),
    )
    llm.answer(200, completion("Sorry, I could not do that."))

    send(v2[1], {"message": "hi"})

    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(llm.received[1])}
    assert answers["call_a"].startswith("Error: there is no tool named 'send_email'")
    assert "schedule_reminder" in answers["call_a"]
    assert answers["call_b"].startswith("Error: The arguments are not valid JSON")
    assert Action.objects.filter(is_error=True).count() == 2
    assert delivery().status == DeliveryStatus.DELIVERED
    assert not Reminder.objects.exists()


def test_a_model_that_loops_on_tools_is_stopped_after_the_rounds(send, llm, v2, settings):
    for number in range(settings.ASSISTANT_TOOL_ROUNDS + 1):
        llm.answer(200, completion(tool_calls=[call("list_reminders", {}, f"call_{number}")]))

    send(v2[1], {"message": "hi"})

    assert len(llm.received) == settings.ASSISTANT_TOOL_ROUNDS + 1
    assert all("tools" in r.json() for r in llm.received[:-1])
    assert "tools" not in llm.received[-1].json()  # the last request offers none: answer now
    assert Action.objects.count() == settings.ASSISTANT_TOOL_ROUNDS
    assert delivery().status == DeliveryStatus.DELIVERED
    assert "stopped after 3 rounds" in delivery().reply.text


def test_a_hanging_tool_is_cut_off_and_reported_to_the_model(send, llm, v2, tracker, settings):
    settings.MCP_TIMEOUT_SECONDS = 1
    llm.answer(200, completion(tool_calls=[call("tracker__hang", {})]))
    llm.answer(200, completion("The tracker did not answer."))

    send(v2[1], {"message": "hi"})

    assert "did not answer in time" in tool_messages(llm.received[1])[0]["content"]
    assert Action.objects.get().is_error
    assert delivery().reply.text == "The tracker did not answer."


def test_a_failing_tool_is_reported_to_the_model(send, llm, v2, tracker):
    llm.answer(200, completion(tool_calls=[call("tracker__broken", {})]))
    llm.answer(200, completion("The tracker is down."))

    send(v2[1], {"message": "hi"})

    assert "the tracker is down" in tool_messages(llm.received[1])[0]["content"]
    assert Action.objects.get().is_error


def test_an_unreachable_connection_is_an_error_for_the_model_not_the_delivery(send, llm, v2):
    with running_mcp_server() as server:
        connections.add_connection(v2[0].owner, "Tracker", server.url)
    llm.answer(200, completion(tool_calls=[call("tracker__add", {"a": 1, "b": 2})]))
    llm.answer(200, completion("The tracker cannot be reached."))

    send(v2[1], {"message": "hi"})

    assert "Could not connect" in tool_messages(llm.received[1])[0]["content"]
    assert delivery().status == DeliveryStatus.DELIVERED


def test_after_a_tool_acted_a_failing_model_server_does_not_make_the_delivery_retry(send, llm, v2):
    llm.answer(200, completion(tool_calls=[call("schedule_reminder", {"text": "stretch", "when": "2099-01-05T15:00"})]))
    llm.answer(503, {"error": {"message": "overloaded"}})

    send(v2[1], {"message": "Remind me"})

    assert delivery().status == DeliveryStatus.DELIVERED  # retrying would schedule the reminder twice
    assert "I could not finish my answer" in delivery().reply.text
    assert "schedule_reminder" in delivery().reply.text
    assert Reminder.objects.count() == 1


def test_without_tool_calls_the_reply_is_plain_text(send, llm, v2):
    llm.answer(200, completion("Hello."))
    send(v2[1], {"message": "hi"})
    assert delivery().reply.text == "Hello."
    assert not Action.objects.exists()


def test_the_model_lists_the_persons_webhook_triggers_without_their_secrets(send, llm, v2):
    from triggers.services import create_trigger

    trigger, token = create_trigger(v2[0].owner, "a deploy to production finishes", "Tell me how it went")[:2]
    llm.answer(200, completion(tool_calls=[call("list_webhook_triggers", {})]))
    llm.answer(200, completion("You have one trigger."))

    send(v2[1], {"message": "Which webhooks do I have?"})

    listed = json.loads(tool_messages(llm.received[1])[0]["content"])["triggers"]
    assert [(t["id"], t["condition"], t["action"]) for t in listed] == [
        (trigger.public_id, "a deploy to production finishes", "Tell me how it went")
    ]
    assert token not in tool_messages(llm.received[1])[0]["content"]


def test_malformed_tool_calls_are_answered_and_the_conversation_stays_valid(send, llm, v2):
    llm.answer(
        200, completion(tool_calls=[{"id": "call_x"}, {"type": "function", "function": {"name": "list_reminders"}}])
    )
    llm.answer(200, completion("Done."))

    send(v2[1], {"message": "hi"})

    turn = llm.received[1].json()["messages"][-3]
    ids = [c["id"] for c in turn["tool_calls"]]
    assert ids[0] == "call_x" and ids[1].startswith("call_")  # an id made up where the model sent none
    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(llm.received[1])}
    assert set(answers) == set(ids)  # every call has its answer
    assert answers["call_x"].startswith("Error: there is no tool named ''")
    assert answers[ids[1]] == "No reminders are scheduled."
    assert delivery().reply.text == "Done."


def test_at_most_eight_calls_run_in_one_round(send, llm, v2):
    llm.answer(200, completion(tool_calls=[call("list_reminders", {}, f"call_{n}") for n in range(10)]))
    llm.answer(200, completion("Done."))

    send(v2[1], {"message": "hi"})

    answers = [m["content"] for m in tool_messages(llm.received[1])]
    assert len(answers) == 10
    assert answers[8].startswith("Error: at most 8 tool calls")
    assert Action.objects.count() == 8


def test_at_most_128_tools_are_offered_built_in_ones_first(send, llm, v2, mcp_tools_galore):
    llm.answer(200, completion("Hello."))
    send(v2[1], {"message": "hi"})
    offered = [tool["function"]["name"] for tool in llm.received[0].json()["tools"]]
    assert len(offered) == 128
    assert offered[:4] == ["schedule_reminder", "list_reminders", "cancel_reminder", "list_webhook_triggers"]


@pytest.fixture
def mcp_tools_galore(v2):
    from connections.models import Connection, Tool

    connection = Connection.objects.create(owner=v2[0].owner, name="Big", server_url="http://127.0.0.1:9/mcp")
    Tool.objects.bulk_create(Tool(connection=connection, name=f"tool_{n:03d}") for n in range(200))


@pytest.mark.django_db(transaction=True)
def test_a_connection_removed_while_the_delivery_runs_is_an_error_for_the_model(send, llm, v2, tracker):
    """The person removes the connection after the model was offered its tools and before it calls one: the call's
    result tells the model the connection is gone, the server is not called, and the delivery goes on (it ended
    failed through an IntegrityError: the call's record pointed at the removed connection)."""
    import threading
    import time

    from django.db import connection as database_connection

    from connections.models import Connection

    offered = threading.Event()
    llm.answer(200, completion(tool_calls=[call("tracker__create_issue", {"title": "Flaky deploy"})]), hold=offered)
    llm.answer(200, completion("The tracker connection is gone; I opened nothing."))

    def remove_once_the_tools_were_offered() -> None:
        # Only while the delivery waits for the model's answer (held until `offered`): on SQLite the test's thread and
        # this one share one in-memory database, and a statement of each at once is "database table is locked".
        try:
            deadline = time.monotonic() + 60  # a loaded machine may take a while to reach the model
            while not llm.received and time.monotonic() < deadline:
                time.sleep(0.02)
            if llm.received:
                connections.remove_connection(Connection.objects.get())
        finally:
            database_connection.close()
            offered.set()

    remover = threading.Thread(target=remove_once_the_tools_were_offered)
    remover.start()
    send(v2[1], {"message": "Open an issue about the flaky deploy"})
    remover.join(60)

    assert "tracker__create_issue" in {tool["function"]["name"] for tool in llm.received[0].json()["tools"]}
    result = tool_messages(llm.received[1])[0]["content"]
    assert "was removed" in result
    assert not any(name == "create_issue" for name, _ in tracker.calls)
    assert delivery().status == DeliveryStatus.DELIVERED
    assert delivery().reply.text == "The tracker connection is gone; I opened nothing."
