"""The hot path: what accepting a message costs, and the few places where it steps around the ORM or a library to
cost less. Everything else in the service is plain Django; these modules are the exceptions, kept in one place.

What each one bypasses, and what that saves. Instructions per request, counted by callgrind in-process through
Django's WSGI handler with the server's settings, PostgreSQL and Redis (``python -m bench.instructions``; each bypass
switched back to plain Django alone by ``bench/ablations.py``, everything else on; PostgreSQL's and Redis's own
work not counted). Against plain Django (docs/benchmarks.md has the table, its dates and the method; the first
three on 2026-11-24 when an accepted message still wrote a task row, the fourth on ea13a44, the rest when the
bypass was introduced). Each saves something measurable, so each stays:

- remembered keys (``recent.py``, current): 3.08 M with, 3.44 M without: 10 %, and one statement of two.
- the ordinary request without DRF (``ingestion/accept.py``, current): 2.32 M with, 2.74 M without: 15 % (afdee3d).
- joined lookup (``lookup.py``, legacy): 3.42 M with, 6.45 M without: 47 %.
- one-statement insert (``inserts.py``, current): 3.08 M with, 5.67 M without: 46 %, and 3 to 4 round trips.
- own counting connection (``cache.py``, current): 2.76 M with, 2.88 M without: 4 %.
- fetch_one (``db.py``, ``postgresql/``, current): 3.35 M with, 3.42 M without: 2 % (third session).
- one client per pool (``cache.py``, refused): about 540 Python calls per cache operation: a sixth of an accepted
  request's calls then, nearly half of a refused one's (third session).
- quiet health check (``postgresql/``, current): a round trip per request, mostly outside what callgrind counts (the
  wait, PostgreSQL's work): about a tenth of an accepted message's cost in throughput (second session).
- atomic incr (``cache.py``, refused): a correctness fix: a counter that expires between the two comes back without
  its expiry.

The modules:

- ``recording.py``: what every entry point calls to record a person's message with its delivery.
- ``lookup.py``: a well-formed key's one indexed SELECT, joined with what the request needs next (the owner's id
  and is_active, their conversation, for the legacy endpoint the profile), built once per process; plain Django
  would be ``select_related`` through the query compiler, with the whole users row.
- ``recent.py``: V2 keys a worker found valid lately are remembered for ``API_KEY_CACHE_SECONDS``; such a key is
  unconfirmed until the message's own insert confirms it (``inserts.Condition``), so revocation still takes effect
  on the next request.
- ``memo.py``: cachetools' TTLCache (expiring, size-bounded) behind a lock, which ``recent.py`` and
  ``channels/senders.py`` remember lookups in.
- ``inserts.py``: the message and its delivery record in one PostgreSQL statement (data-modifying WITH queries),
  sending ``pre_save``/``post_save`` as ``save()`` does; elsewhere, and for a model that overrides a step of
  ``save()``, the ORM's own saves in one transaction. Other rows may go with them, and changes to existing rows
  (``Update``), in the same statement.
- Outside this package, for the layers' sake (it reads the request the way the authentication does):
  ``ingestion/accept.py``, the current endpoint's ordinary request (a remembered key, a plain JSON body, with or
  without an Idempotency-Key, whose record goes in the message's statement) served without DRF's request,
  negotiation and response objects, with the full view's checks in the full view's order and its exception handling
  for every refusal (tests/test_accept_fast_path.py sends each refusal both ways): 2,263 Python calls per accepted
  message without it, 2,038 with it (docs/benchmarks.md).
- Also outside: ``channels/senders.py``, a channel's webhook's counterpart of
  ``lookup.py`` and ``recent.py``: the linked address with its person and thread in one SELECT written once per
  process, remembered for CHANNEL_SENDER_CACHE_SECONDS and confirmed by the message's own statement (which also
  writes the provider's id and stamps the address). A Telegram update from a linked chat went from 7 statements in a
  transaction to 1, and from 2.4 to 0.9 CPU-ms in-process, level with api-message (docs/benchmarks.md, "Channels").
- ``db.py`` and ``postgresql/``: one row from one statement on psycopg's cursor with Django's health, thread and
  transaction checks, but without Django's cursor wrapper; and a health check that polls the idle socket instead
  of sending ``SELECT 1`` before each request's first query (that round trip and PostgreSQL's work are mostly
  outside what callgrind counts here).
- ``cache.py``: the per-key count as one Lua call over each thread's own Redis connection, one redis-py client per
  connection pool instead of one per cache operation, and an ``incr`` that cannot recreate an expired counter
  without its expiry (a correctness fix more than a saving).

What keeps it honest:

- tests/test_hotpath.py: no model an accepted message writes overrides a step of ``save()`` (one that does is
  written by its own ``save()``), what a ``pre_save`` receiver changes is written, and the query-count tests take
  the production path: a statement watched by CaptureQueriesContext, an execute wrapper or DEBUG's log goes through
  ``fetch_one``'s own path, not Django's cursor.
- tests/test_inserts.py: every value the statement sends is what the field's own ``get_db_prep_save`` would send;
  one failing row writes none; the condition writes all or nothing.
- tests/test_remembered_keys.py and tests/test_two_web_processes.py: a key revoked, deleted, deactivated or moved
  is refused from the next request, in one process and across two gunicorn processes.
- tests/test_key_lookup.py, tests/test_database_settings.py, tests/test_rate_limits.py: the lookup loads the key,
  its owner and their thread in one query and fails as the ORM does where a row is missing; ``fetch_one`` raises
  Django's error classes, refuses a broken transaction and replaces a connection the server closed; the count costs
  one Redis round trip, expires with its window, and goes on after Redis drops the connection.
"""
