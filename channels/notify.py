"""Short notices of our own to an address (a link code, "how to link", "linked"): straight through the channel's
adapter, outside any transaction. Not part of the thread, so not through the outbox; a failure is logged (never the
text, which may hold a code) and the caller decides what the person is told.

A link code is sent while the person waits on the console page (it says whether the code went). The answers to a
provider's callback go as a task after the commit (``deliver_notice``), so the provider's request never waits on a
send: the worker sends them (the immediate backend, at once)."""

import logging
import secrets

from django.tasks import task

from channels.adapters import adapter_for
from channels.adapters.base import SendError

logger = logging.getLogger(__name__)


def send_notice(channel: str, address: str, text: str) -> str:
    """Send ``text``; "" when it went, else the reason it did not (for the page that asked)."""
    adapter = adapter_for(channel)
    if adapter is None:
        return "This channel is not offered any more."
    try:
        adapter.send_text(address, text, reference=f"notice_{secrets.token_hex(8)}")
    except SendError as error:
        logger.warning("channel notice to %s not sent: %s", channel, error.reason)
        return error.reason
    return ""


@task
def deliver_notice(channel: str, address: str, text: str) -> None:
    """A notice as a task: no retry (a "how to link" or "linked" answer that failed is not worth a second text)."""
    send_notice(channel, address, text)
