"""The hot path: what accepting a message costs, and the few places where it steps around the ORM or a library to
cost less. Everything else in the service is plain Django; these modules are the exceptions, kept in one place.

- ``lookup.py``: a well-formed key's one indexed SELECT, joined with what the request needs next (owner id,
  conversation, for the legacy endpoint the profile), built once per process instead of by ``select_related``.
- ``recent.py``: V2 keys a worker found valid lately are remembered for ``API_KEY_CACHE_SECONDS``; such a key is
  unconfirmed until the message's own insert confirms it (``inserts.Condition``), so revocation still takes effect
  on the next request.
- ``inserts.py``: the message, its delivery record and the hand-off task in one PostgreSQL statement (data-modifying
  WITH queries), sending ``pre_save``/``post_save`` as ``save()`` does; elsewhere the ORM's own saves in one
  transaction.
- ``recording.py``: what every entry point calls to record a person's message with its hand-off.
- ``db.py`` and ``postgresql/``: one row from one statement on psycopg's cursor with Django's health, thread and
  transaction checks, but without Django's cursor wrapper (the fallback whenever queries are being captured).
- ``cache.py``: the per-key count as one Lua call over each thread's own Redis connection.

Each of these earns its place by a measured saving per accepted request (``python -m bench.instructions``), given
in its own docstring; docs/benchmarks.md has the method and the history.
"""
