"""Signals that let a lower layer tell the ones above it that something happened, without importing them.

``asker_gone``: whatever may have asked the person to approve an action is gone: an API key revoked or rolled
(``key=``), a webhook trigger removed (``trigger=``), an MCP connection about to be removed (``connection=``). Sent
inside the transaction that makes the change, with ``why`` in the person's words ("the API key “ci” was revoked");
the assistant expires the requests it asked for at once (assistant/approval/requests.py, ``withdraw_pending``), in the
same transaction."""

from django.dispatch import Signal

asker_gone = Signal()
