"""Messages written for the person (the assistant's replies, due reminders, tools' follow-ups) are announced here,
inside the transaction that writes them, so that a way out registered from above (the channels app's outbox) can
enqueue them in that same transaction: the message and its way to the phone exist together or not at all.

The writers live on several floors (delivery, reminders, ingestion) and the outbox above them; this registration
keeps the imports running down (docs/explanation/architecture.md#the-layers). A listener raising makes the writer's
transaction fail: a reply is never in the thread without its outbox rows."""

from collections.abc import Callable, Sequence
from typing import Any

Listener = Callable[[Sequence[int]], Any]

# A message whose context holds this key (true) lives in the thread only: no way out sends it (an approval request
# past the few a person's phone gets in a window, assistant/approval/requests.py).
NOT_TEXTED = "notTexted"

_listeners: list[tuple[Listener, Callable[[], bool]]] = []


def listen(listener: Listener, active: Callable[[], bool] = lambda: True) -> None:
    """Register ``listener`` (once, from an AppConfig.ready): it gets the new messages' primary keys. ``active``
    says whether it wants them at all (a way out that is not configured does not), so that a writer whose write is
    one statement opens no transaction for nothing."""
    if all(listener is not known for known, _ in _listeners):
        _listeners.append((listener, active))


def wanted() -> bool:
    """Whether a writer must announce what it writes (and so write it inside a transaction)."""
    return any(active() for _, active in _listeners)


def written(message_ids: Sequence[int]) -> None:
    """Call inside the transaction that wrote these messages (assistant or tool messages of people's threads)."""
    if message_ids:
        for listener, active in _listeners:
            if active():
                listener(message_ids)
