"""An OpenAI-compatible chat-completions client (OpenAI, Ollama, vLLM, llama.cpp's server, ...), with tool calling.

POST {OPENAI_BASE_URL}/chat/completions with the model, a system prompt, the recent thread and the person's tools
(built-in ones and their MCP connections' tools, Chat Completions `tools`). While the model answers with
`tool_calls`, each call is run and its result (or its error) goes back as a `role: tool` message; the loop ends
with the model's text, which is the reply, or after ASSISTANT_TOOL_ROUNDS rounds or ASSISTANT_TOOL_SECONDS, when the
model is asked once more without tools. The API key goes only into the Authorization header: never into logs or
errors.

Once a tool has acted, a later failure of the model's server does not fail the delivery (a retry would act twice):
the reply then says what was done and that the answer could not be finished.
"""

import json
import time
import uuid
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from assistant import http
from assistant.conversation import AssistantRequest, ThreadEntry
from assistant.outcomes import DeliveryFailure, PermanentFailure, Reply, storable_reply
from assistant.tools import Toolbox
from assistant.tools.toolbox import toolbox_for_request
from conversations.models import AssistantBackend, Role, Source

SERVICE = "The chat-completions API"
MAX_CALLS_PER_ROUND = 8
TOOLS_PROMPT = (
    "You can act for the person with the tools provided: use them when the message asks for something they can do, "
    "then reply briefly with what you did. The person's time zone is {zone}; it is {now} there now. "
    # What the person reads is a sentence: the tools' ids and rules are for calling the tools again.
    'Say times and repetitions in plain words ("Mon 30 Nov, 09:00", "every Monday at 09:00"); never show the '
    "person an id (rem_…, an event's id), an RRULE or an ISO timestamp."
)


def chat_messages(request: AssistantRequest) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for entry in request.thread:
        if entry.role == Role.ASSISTANT and entry.replied_by == AssistantBackend.LOCAL:
            continue  # the built-in local assistant's receipts ("I take no action"): not words for a model to go on
        content = _content_of_current(request) if entry.id == request.message_id else _content(entry)
        history.append({"role": "assistant" if entry.role == Role.ASSISTANT else "user", "content": content})
    # The window of recent messages may begin with an answer whose question fell outside it: a chat starts with the
    # person speaking (some servers refuse anything else, and a model would take the orphan for its own opening).
    while history and history[0]["role"] != "user":
        history.pop(0)
    return [{"role": "system", "content": settings.ASSISTANT_SYSTEM_PROMPT}, *history]


def _content(entry: ThreadEntry) -> str:
    if entry.role == Role.TOOL:
        return f"(A follow-up from a tool you called earlier.)\n{entry.text}"
    return entry.text or "(a JSON payload without text)"


def _content_of_current(request: AssistantRequest) -> str:
    """The message itself, with the rest of what the caller sent when there is more than the text."""
    extra = request.context if isinstance(request.context, dict) else None
    if request.source == Source.TOOL_FOLLOW_UP and extra is not None:
        more = "More follow-ups may come." if extra.get("hasMore") else "This is its last follow-up."
        return f"A follow-up from the tool {extra.get('tool', '')} you called earlier. {more}\n\n{request.text}"
    if extra is not None and set(extra) - {"message"}:
        attached = json.dumps(extra, ensure_ascii=False)
        return f"{request.text or '(no text)'}\n\nThe request that carried this message (JSON):\n{attached}"
    return request.text or "(an empty message)"


def deliver(request: AssistantRequest) -> Reply:
    toolbox = toolbox_for_request(request, reads_thread=True)  # the model reads the thread: its words count
    messages = chat_messages(request)
    if toolbox is not None and toolbox.tools:
        zone = toolbox.time_zone
        now = timezone.now().astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M (%A)")
        messages[0]["content"] += "\n\n" + TOOLS_PROMPT.format(zone=zone, now=now)
    return _converse(messages, toolbox)


def _converse(messages: list[dict[str, Any]], toolbox: Toolbox | None) -> Reply:
    deadline = time.monotonic() + settings.ASSISTANT_TOOL_SECONDS
    done: list[str] = []  # what the tools did, for a reply when the model cannot finish
    rounds = settings.ASSISTANT_TOOL_ROUNDS if toolbox is not None and toolbox.tools else 0
    for round_number in range(1, rounds + 2):
        offer = round_number <= rounds and time.monotonic() < deadline
        try:
            answer = _complete(messages, toolbox.as_openai() if offer and toolbox is not None else None)
        except DeliveryFailure as failure:
            if not done:
                raise
            return Reply(_unfinished(done, f"the model's server failed ({failure})"))
        calls = answer.get("tool_calls")
        if not calls:
            return _final(answer, done)
        if not offer or toolbox is None:
            # Asked for tools when none were offered: the rounds or the time are used up (or it has none).
            text = storable_reply(answer.get("content"))
            return Reply(text or _unfinished(done, f"it stopped after {rounds} rounds of tool calls"))
        messages.append(_assistant_turn(answer, calls))
        for index, call in enumerate(messages[-1]["tool_calls"]):
            outcome = _run(call, toolbox, round_number, deadline, index)
            done.append(f"{call['function']['name']}: {outcome[:200]}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": outcome})
    raise PermanentFailure(f"{SERVICE} kept asking for tools.")  # not reached: the last round offers none


def _final(answer: dict[str, Any], done: list[str]) -> Reply:
    """The model's last word: its text, or what the tools did when it has none."""
    text = storable_reply(answer.get("content"))
    if text is not None:
        return Reply(text)
    if done:
        return Reply(_unfinished(done, "the model gave no final answer"))
    raise PermanentFailure(f"{SERVICE} answered with an empty or non-text message content.")


def _assistant_turn(answer: dict[str, Any], calls: Any) -> dict[str, Any]:
    """The model's turn as it goes back into the conversation: every call with an id, a name and its arguments as
    a string, so that each gets its `role: tool` answer (the API refuses a conversation with an unanswered call).
    What the model actually sent as arguments rides along under `_raw_arguments` until the call runs."""
    kept = []
    for item in calls if isinstance(calls, list) else []:
        call: dict[str, Any] = item if isinstance(item, dict) else {}
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
        name, raw = function.get("name"), function.get("arguments")
        kept.append(
            {
                "id": str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
                "type": "function",
                "function": {
                    "name": name if isinstance(name, str) else "",
                    "arguments": raw if isinstance(raw, str) else "{}",
                },
                "_raw_arguments": raw,
            }
        )
    return {"role": "assistant", "content": answer.get("content") or None, "tool_calls": kept}


def _run(call: dict[str, Any], toolbox: Toolbox, round_number: int, deadline: float, index: int) -> str:
    raw = call.pop("_raw_arguments", None)
    if index >= MAX_CALLS_PER_ROUND:
        return f"Error: at most {MAX_CALLS_PER_ROUND} tool calls are run per round; ask for the rest in the next one."
    if time.monotonic() >= deadline:
        return "Error: no time is left for tool calls in this turn; answer with what you have."
    return toolbox.call(call["id"], call["function"]["name"], raw, round_number, deadline)


def _unfinished(done: list[str], why: str) -> str:
    lines = "\n".join(f"- {entry}" for entry in done[-10:])
    return f"I could not finish my answer ({why}). What I did:\n{lines}"


def _complete(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": settings.OPENAI_MODEL, "messages": messages}
    if tools:
        payload["tools"] = tools
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    url = settings.OPENAI_BASE_URL.rstrip("/") + "/chat/completions"
    response = http.post_to_runtime(url, body, headers)
    http.raise_for_status(response, SERVICE, _error_detail(response.body))
    return _message(response.body)


def _message(body: bytes) -> dict[str, Any]:
    try:
        answer: Any = json.loads(body)
        message = answer["choices"][0]["message"]
    except (ValueError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        raise PermanentFailure(f"{SERVICE} answered without choices[0].message.content.") from None
    if not isinstance(message, dict):
        raise PermanentFailure(f"{SERVICE} answered without choices[0].message.content.")
    return message


def _error_detail(body: bytes) -> str:
    """error.message from an error body, with the API key masked in case a server echoes it back."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return ""
    # OpenAI and vLLM send {"error": {"message": ...}}; Ollama sends {"error": "..."}.
    detail = error.get("message") if isinstance(error, dict) else error
    if not isinstance(detail, str):
        return ""
    if settings.OPENAI_API_KEY:
        detail = detail.replace(settings.OPENAI_API_KEY, "[redacted]")
    return http.printable(detail)
