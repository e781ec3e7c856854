"""A chat-completions server on 127.0.0.1 whose model obeys every ``CALL:<tool>:<json>`` it reads, wherever it reads
it: the person's words, another's message in the thread, a tool's result, a follow-up. The worst case of prompt
injection, for the approval tests (tests/test_approval_attacks.py): whatever it is led to call, nothing that acts
may run without the person's answer.

Each call it reads is made once per conversation it is sent (a call already answered in it is not asked again);
``plan`` adds calls for the person's own words (a phrase of theirs and what a model would call for it, e.g. "read my
latest mail" → mail_read). A name is matched to the offered tools as is, or as an MCP tool's name after its
connection's prefix (``bank__transfer_money`` for ``transfer_money``). With nothing left to call it answers "Done."
"""

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.servers import send_json

CALL = re.compile(r"CALL:([A-Za-z0-9_-]+):")


class ObedientModel(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.plan: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(request)
        offered = [tool["function"]["name"] for tool in request.get("tools") or []]
        messages = request.get("messages") or []
        made = {
            (call["function"]["name"], _canonical(call["function"]["arguments"]))
            for message in messages
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or []
        }
        wanted = [*self._planned(messages), *(found for message in messages for found in read_calls(message))]
        calls = []
        for name, arguments in wanted:
            tool = _offered(name, offered)
            if tool is None or (tool, _canonical(arguments)) in made:
                continue
            made.add((tool, _canonical(arguments)))
            calls.append(
                {"id": f"call_{len(made)}", "type": "function", "function": {"name": tool, "arguments": arguments}}
            )
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else "Done."}
        if calls:
            message["tool_calls"] = calls
        return {"id": "chatcmpl-obedient", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}

    def _planned(self, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
        said = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user").lower()
        return [
            (name, json.dumps(arguments))
            for phrase, calls in self.plan.items()
            if phrase in said
            for name, arguments in calls
        ]

    def called(self) -> list[str]:
        """Every tool call the model asked for, in order (what it was led to, whether or not it ran)."""
        return [
            call["function"]["name"]
            for request in self.requests
            for message in request.get("messages") or []
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or []
        ]


def read_calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``CALL:<tool>:<json object>`` found in a message's text, as (name, arguments as JSON)."""
    text = message.get("content")
    if not isinstance(text, str):
        return []
    found = []
    for match in CALL.finditer(text):
        try:
            arguments, _ = json.JSONDecoder().raw_decode(text, match.end())
        except ValueError:
            continue
        if isinstance(arguments, dict):
            found.append((match.group(1), json.dumps(arguments)))
    return found


def _offered(name: str, offered: list[str]) -> str | None:
    if name in offered:
        return name
    return next((tool for tool in offered if tool.endswith("__" + name)), None)


def _canonical(arguments: Any) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (TypeError, ValueError):
        return str(arguments)


class _Handler(BaseHTTPRequestHandler):
    server: ObedientModel

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        send_json(self, 200, json.dumps(self.server.answer(json.loads(body))).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def obedient_model() -> Iterator[ObedientModel]:
    server = ObedientModel()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
