"""An OpenAI-compatible chat-completions client (OpenAI, Ollama, vLLM, llama.cpp's server, ...).

POST {OPENAI_BASE_URL}/chat/completions with the model, a system prompt and the recent thread; the reply is
choices[0].message.content. The API key goes only into the Authorization header: never into logs or errors.
"""

import json
from typing import Any

from django.conf import settings

from assistant import http
from assistant.conversation import AssistantRequest, ThreadEntry
from assistant.outcomes import PermanentFailure, Reply, storable_reply

SERVICE = "The chat-completions API"


def chat_messages(request: AssistantRequest) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": settings.ASSISTANT_SYSTEM_PROMPT}]
    for entry in request.thread:
        content = _content_of_current(request) if entry.id == request.message_id else _content(entry)
        messages.append({"role": "assistant" if entry.role == "assistant" else "user", "content": content})
    return messages


def _content(entry: ThreadEntry) -> str:
    return entry.text or "(a JSON payload without text)"


def _content_of_current(request: AssistantRequest) -> str:
    """The message itself, with the rest of what the caller sent when there is more than the text."""
    extra = request.context if isinstance(request.context, dict) else None
    if extra is not None and set(extra) - {"message"}:
        attached = json.dumps(extra, ensure_ascii=False)
        return f"{request.text or '(no text)'}\n\nThe request that carried this message (JSON):\n{attached}"
    return request.text or "(an empty message)"


def deliver(request: AssistantRequest) -> Reply:
    body = json.dumps({"model": settings.OPENAI_MODEL, "messages": chat_messages(request)}).encode()
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    url = settings.OPENAI_BASE_URL.rstrip("/") + "/chat/completions"
    response = http.post_json(url, body, headers, settings.ASSISTANT_TIMEOUT_SECONDS)
    http.raise_for_status(response, SERVICE, _error_detail(response.body))
    return Reply(_reply_text(response.body))


def _reply_text(body: bytes) -> str:
    try:
        answer: Any = json.loads(body)
        content = answer["choices"][0]["message"]["content"]
    except (ValueError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        raise PermanentFailure(f"{SERVICE} answered without choices[0].message.content.") from None
    text = storable_reply(content)
    if text is None:
        raise PermanentFailure(f"{SERVICE} answered with an empty or non-text message content.")
    return text


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
