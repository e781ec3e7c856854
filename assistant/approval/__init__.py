"""Approval: the one decision on a tool call, and the words a person reads to answer it
(docs/explanation/approval.md).

- ``rule.py``: ``decide`` returns the verdict for one call (run, ask, refuse) from the words' origin, what the
  attempt read, the key's policy (its tools, "ask me first"), the tool's effect and the person's trust in its server.
  ``Toolbox.call`` (assistant/tools/__init__.py) plans a call, decides it here, runs it, and records it.
- ``text.py``: the request in words, for the thread, the console and the phone.
- ``codes.py``: the code that names one request, typed from a phone or carried by a button's token, and why guessing
  it is hopeless.
- ``requests.py``: the requests themselves, ``Action`` rows (assistant/models.py): asking (within the caps on what may
  wait and on texts), expiring and withdrawing them.
- ``askers.py``: who asked for a request (its key, trigger, connection or person), so that it dies with them.

The person's answer stays above this layer (docs/explanation/architecture.md#the-layers): ingestion/approvals.py
records an approval as the person's message through ingestion's own path, and channels/approvals.py reads it from a
phone. A request's life::

    model asks for a call ──► decide ──► RUN ──────────────────────────────────────────────► ran (done)
                               │  └────► REFUSE: not run, the model is told why ─────────► done (error)
                               ▼
                              ASK: recorded awaiting_approval, asked in the thread and on the phone
                               │
          ┌────────────────────┼──────────────────────────┬───────────────────────────┐
          ▼                    ▼                          ▼                           ▼
      approved             denied                   expired                    withdrawn
   (console or phone)   "You denied it"      (APPROVAL_TIMEOUT_SECONDS)   (its key, trigger, connection
          │                                                                 or account went: expired,
          ▼                                                                 said why)
   the approval's own delivery runs it first, through the ledger ──► ran (once, or "effect unknown")

Only the hand-off of the person's answer (assistant/backends/approved.py, ``Toolbox.call_approved``) says a call was
approved; nothing the model sends can.
"""
