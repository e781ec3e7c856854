"""A history of ``messages`` rows written by PostgreSQL itself (INSERT … SELECT generate_series), for the benchmarks
that measure what pages, receipts, lists and prunes cost at that size (bench/history_costs.py,
bench/partition_trial.py).

The schema is the service's own (its migrations, on a database of its own). What is written, over ``days`` days
ending ten minutes ago, among ``people`` people (each with a conversation, a key and a webhook trigger):

- messages in pairs, the person's and the assistant's reply; one pair in 20 came from a webhook trigger, the rest
  through the API with the person's key; one pair in ``KEY_EVERY`` is the measured person's (their key, their
  thread);
- a delivery for each person's message, replied to (one in 100 failed) but for the newest ``QUEUED`` pairs' (queued);
- a text (SMS) for one reply in five (one in 100 of those failed), a tool call for one delivery in five, an audit
  line per ten messages (over ``days`` + 100 days), a trigger's firing and received-delivery record per triggered
  message, an Idempotency-Key record for one pair in ten (API messages all);
- then a burst in the measured person's thread: ``BURST`` messages over the last ten minutes, each delivered.

While a table is filled its secondary indexes and its unique and foreign-key constraints are set aside and made
again afterwards from their own definitions (a sort per index rather than a random insert per row; the constraints
are checked then, over the whole table): the tables end exactly as the migrations made them. Then ANALYZE.
"""

import hashlib
import time
from typing import Any

import psycopg

KEY_EVERY = 50
QUEUED = 1_000
BURST = 11_377

PEOPLE = """
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                       date_joined)
SELECT '', false, 'hp' || g, '', '', 'hp' || g || '@example.com', false, true, now() - interval '500 days'
FROM generate_series(1, %(people)s) AS g ORDER BY g;
INSERT INTO conversations_conversation (user_id, created_at)
SELECT id, date_joined FROM auth_user WHERE username LIKE 'hp%%' ORDER BY id;
INSERT INTO keys_apikey (name, generation, digest, hint, created_at, owner_id, scopes, scopes_predate_choice,
                         allowed_tools, tool_access, tools_need_approval, test_mode)
SELECT 'history', 'v2', md5('key' || id) || md5('key2' || id), 'hist', date_joined, id, '', false, '[]', 'all',
       false, false
FROM auth_user WHERE username LIKE 'hp%%' ORDER BY id;
INSERT INTO triggers_webhooktrigger (public_id, condition, action, digest, hint, signing_salt, created_at,
                                     fire_count, owner_id)
SELECT 'wh_' || substr(md5('wh' || id), 1, 20), '', 'say so', md5('trigger' || id) || md5('t2' || id), 'hint', '',
       date_joined, 0, id
FROM auth_user WHERE username LIKE 'hp%%' OR id = %(person)s ORDER BY id;
"""

# %(…)s: first_user/first_conversation/first_key/first_trigger, the ids of the first of the `people` rows of each
# (consecutive); the measured person's own: person, conversation, key, trigger.
MESSAGES = """
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, api_key_id, trigger_id,
                                   created_at)
SELECT 'msg_' || substr(md5(g::text), 1, 24),
       CASE WHEN mine THEN %(conversation)s ELSE %(first_conversation)s + pair %% %(people)s END,
       CASE WHEN reply THEN 'assistant' ELSE 'user' END,
       CASE WHEN reply THEN 'assistant' WHEN triggered THEN 'webhook_trigger' ELSE 'api' END,
       CASE WHEN reply THEN 'Done: reminder set for ' || pair ELSE 'remind me about item ' || pair END,
       CASE WHEN reply OR triggered THEN NULL WHEN mine THEN %(key)s ELSE %(first_key)s + pair %% %(people)s END,
       CASE WHEN reply OR NOT triggered THEN NULL WHEN mine THEN %(trigger)s
            ELSE %(first_trigger)s + pair %% %(people)s END,
       now() - interval '10 minutes' - interval '1 day' * (%(days)s * (%(messages)s - g)::float8 / %(messages)s)
FROM (SELECT g, (g + 1) / 2 AS pair, g %% 2 = 0 AS reply, ((g + 1) / 2) %% 20 = 0 AS triggered,
             ((g + 1) / 2) %% %(key_every)s = 0 AS mine
      FROM generate_series(1, %(messages)s) AS g) AS s
ORDER BY g;
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, api_key_id, created_at)
SELECT 'msg_' || substr(md5('burst' || g), 1, 24), %(conversation)s, 'user', 'api', 'burst ' || g, %(key)s,
       now() - interval '10 minutes' + interval '600 seconds' * (g::float8 / %(burst)s)
FROM generate_series(1, %(burst)s) AS g ORDER BY g
"""

DELIVERIES = """
INSERT INTO conversations_delivery (message_id, conversation_id, api_key_id, endpoint, status, attempts, takeovers,
    last_error, request_id, backend, callback_id, started_at, finished_at, reply_id, created_at, updated_at)
SELECT m.id, m.conversation_id, m.api_key_id,
       CASE WHEN m.source = 'webhook_trigger' THEN 'webhook_trigger' ELSE 'api_message' END,
       CASE WHEN m.id BETWEEN %(queued_after)s AND %(last_pair)s THEN 'queued'
            WHEN (m.id - %(first_message)s) / 2 %% 100 = 50 THEN 'failed' ELSE 'delivered' END,
       1, 0, '', '', 'local', '', m.created_at, m.created_at,
       CASE WHEN m.id < %(queued_after)s THEN m.id + 1 END, m.created_at, m.created_at
FROM conversations_message AS m WHERE m.role = 'user' ORDER BY m.id
"""

SIDE_ROWS = """
INSERT INTO channels_outboundmessage (message_id, person_id, part, parts, channel, address, text, status, attempts,
    takeovers, last_error, held_reason, waiting_for_quiet_hours, as_template, provider_message_id, provider_status,
    provider_error, sent_at, created_at, updated_at)
SELECT m.id, c.user_id, 1, 1, 'sms', '+15005550006', m.text,
       CASE WHEN (m.id - %(first_message)s) / 2 %% 500 = 0 THEN 'failed' ELSE 'sent' END,
       1, 0, '', '', false, false, 'SM' || m.id, 'delivered', '', m.created_at, m.created_at, m.created_at
FROM conversations_message AS m JOIN conversations_conversation AS c ON c.id = m.conversation_id
WHERE m.role = 'assistant' AND (m.id - %(first_message)s) / 2 %% 5 = 0 ORDER BY m.id;
INSERT INTO assistant_action (delivery_id, attempt, round, tool_call_id, kind, tool, connection_name, arguments,
    result, is_error, started_at, finished_at, follow_ups, call_index, state, requested_by, read_outside,
    approval_code)
SELECT id, 1, 1, 'call_' || id, 'builtin', 'create_reminder', '', '{"text": "item"}', 'ok', false, created_at,
       created_at, 0, 0, 'done', '', false, ''
FROM conversations_delivery WHERE id %% 5 = 0 ORDER BY id;
INSERT INTO accounts_auditevent (account_id, at, kind, summary, actor)
SELECT CASE WHEN g %% %(key_every)s = 0 THEN %(person)s ELSE %(first_user)s + g %% %(people)s END,
       now() - interval '1 day' * ((%(days)s + 100) * (%(audit)s - g)::float8 / %(audit)s), 'key_used',
       'Used key ' || g, 'person'
FROM generate_series(1, %(audit)s) AS g ORDER BY g;
INSERT INTO ingestion_triggerfiring (trigger_id, outcome, code, summary, count, at, last_at, message_id)
SELECT trigger_id, 'accepted', '', 'push to main', 1, created_at, created_at, id
FROM conversations_message WHERE trigger_id IS NOT NULL ORDER BY id;
INSERT INTO triggers_receiveddelivery (trigger_id, fingerprint, received_at)
SELECT trigger_id, 'id:' || md5(id::text), created_at FROM conversations_message WHERE trigger_id IS NOT NULL
ORDER BY id;
INSERT INTO ingestion_idempotencyrecord (api_key_id, key, request_digest, response_status, response_body,
                                         created_at)
SELECT api_key_id, 'order-' || id, md5(id::text) || md5(public_id), 202,
       jsonb_build_object('id', public_id, 'status', 'queued'), created_at
FROM conversations_message WHERE source = 'api' AND (id - %(first_message)s) / 2 %% 10 = 1 AND id <= %(last_pair)s
ORDER BY id
"""

TABLES = [
    "conversations_message",
    "conversations_delivery",
    "channels_outboundmessage",
    "assistant_action",
    "accounts_auditevent",
    "ingestion_triggerfiring",
    "triggers_receiveddelivery",
    "ingestion_idempotencyrecord",
]


def set_aside(db: psycopg.Connection[Any], tables: list[str]) -> list[str]:
    """Drop the secondary indexes and the unique and foreign-key constraints of ``tables`` (those of other tables
    pointing into them stay); returns the statements that make them again. Partial indexes stay: they hold few rows,
    and made again from their definition their predicate would read differently (the same rows, but a planner
    proves a query's condition against the text it has)."""
    names = {"tables": tables}
    constraints = db.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid::regclass::text = ANY(%(tables)s) AND contype IN ('u', 'f') ORDER BY contype DESC",
        names,
    ).fetchall()
    indexes = db.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index AS i "
        "WHERE i.indrelid::regclass::text = ANY(%(tables)s) AND NOT i.indisprimary AND i.indpred IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = i.indexrelid)",
        names,
    ).fetchall()
    for table, name, _ in constraints:
        db.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        db.execute(f"DROP INDEX {name}")
    # Unique constraints before foreign keys (a key may point at one), indexes first of all.
    restore = [definition for _, definition in indexes]
    return restore + [f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {how}' for table, name, how in constraints]


def run(db: psycopg.Connection[Any], sql: str, values: dict[str, Any], log: dict[str, float], step: str) -> None:
    started = time.perf_counter()
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement, values)
    log[step] = round(time.perf_counter() - started, 1)
    print(f"  {step}: {log[step]} s", flush=True)


def build(
    db: psycopg.Connection[Any],
    person: int,
    *,
    messages: int,
    people: int,
    days: int,
    burst: int = BURST,
    queued: int = QUEUED,
) -> dict[str, Any]:
    """Write the history (see the module's docstring) on ``db`` for ``person``, who has a key; returns the ids the
    measures use, the rows of each table and the seconds each step took. On a connection in autocommit mode the
    tables are vacuumed afterwards, else (a test's transaction) only analyzed."""
    log: dict[str, float] = {}
    db.execute("SET maintenance_work_mem = '256MB'")
    db.execute("SET CONSTRAINTS ALL IMMEDIATE")  # in a transaction, no table altered may have checks pending
    db.execute(
        "INSERT INTO conversations_conversation (user_id, created_at) SELECT %s, now() "
        "WHERE NOT EXISTS (SELECT 1 FROM conversations_conversation WHERE user_id = %s)",
        [person, person],
    )
    own = db.execute(
        "SELECT c.id, k.id FROM conversations_conversation AS c JOIN keys_apikey AS k ON k.owner_id = c.user_id "
        "WHERE c.user_id = %s",
        [person],
    ).fetchone()
    assert own is not None, "the person needs a conversation and a key"
    run(db, PEOPLE, {"people": people, "person": person}, log, "people")
    firsts = db.execute(
        "SELECT (SELECT min(id) FROM auth_user WHERE username LIKE 'hp%%'), "
        "(SELECT min(c.id) FROM conversations_conversation AS c JOIN auth_user AS u ON u.id = c.user_id "
        " WHERE u.username LIKE 'hp%%'), "
        "(SELECT min(id) FROM keys_apikey WHERE name = 'history'), "
        "(SELECT min(id) FROM triggers_webhooktrigger WHERE action = 'say so' AND owner_id <> %(person)s), "
        "(SELECT id FROM triggers_webhooktrigger WHERE owner_id = %(person)s ORDER BY id DESC LIMIT 1)",
        {"person": person},
    ).fetchone()
    assert firsts is not None
    values: dict[str, Any] = {
        "people": people, "person": person, "messages": messages, "days": days, "burst": burst,
        "key_every": KEY_EVERY, "audit": messages // 10, "conversation": own[0], "key": own[1],
        "first_user": firsts[0], "first_conversation": firsts[1], "first_key": firsts[2],
        "first_trigger": firsts[3], "trigger": firsts[4],
    }  # fmt: skip
    restore = set_aside(db, TABLES)
    run(db, MESSAGES, values, log, "messages")
    first, last = db.execute(  # the ids follow generate_series's order: the pairs' ids, then the burst's
        "SELECT min(id), max(id) FROM conversations_message WHERE public_id IN (%s, %s)",
        ["msg_" + hashlib.md5(b"1").hexdigest()[:24], "msg_" + hashlib.md5(b"burst%d" % burst).hexdigest()[:24]],
    ).fetchone()  # type: ignore[misc]
    values |= {"first_message": first, "last_pair": last - burst, "queued_after": last - burst - 2 * queued}
    run(db, DELIVERIES, values, log, "deliveries")
    run(db, SIDE_ROWS, values, log, "texts, actions, audit, trigger logs, idempotency")
    run(db, ";".join(restore), {}, log, "indexes and constraints")
    run(db, "VACUUM ANALYZE" if db.autocommit else "ANALYZE", {}, log, "vacuum analyze")
    counts = {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}  # type: ignore[index]
    return {"values": values, "seconds": log, "rows": counts}


GROW = """
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, api_key_id, created_at)
SELECT 'msg_' || substr(md5('old' || %(last_message)s || '.' || g), 1, 24), %(first_conversation)s + g %% %(people)s,
       'user', 'api',
       'remind me about old item ' || g, %(first_key)s + g %% %(people)s,
       now() - interval '91 days' - interval '1 day' * ((%(days)s - 91) * g::float8 / %(extra)s)
FROM generate_series(1, %(extra)s) AS g ORDER BY g;
INSERT INTO conversations_delivery (message_id, conversation_id, api_key_id, endpoint, status, attempts, takeovers,
    last_error, request_id, backend, callback_id, started_at, finished_at, created_at, updated_at)
SELECT id, conversation_id, api_key_id, 'api_message', 'delivered', 1, 0, '', '', 'local', '', created_at,
       created_at, created_at, created_at
FROM conversations_message WHERE id > %(last_message)s ORDER BY id
"""


def grow_deliveries(database_url: str, total: int, values: dict[str, Any]) -> dict[str, Any]:
    """Add expired deliveries (each with its message, older than 91 days) until there are ``total``."""
    log: dict[str, float] = {}
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute("SET maintenance_work_mem = '256MB'")
        have = db.execute("SELECT count(*) FROM conversations_delivery").fetchone()[0]  # type: ignore[index]
        last = db.execute("SELECT max(id) FROM conversations_message").fetchone()[0]  # type: ignore[index]
        if have >= total:
            return {"rows": have}
        restore = set_aside(db, ["conversations_message", "conversations_delivery"])
        run(db, GROW, values | {"extra": total - have, "last_message": last}, log, f"{total - have:,} old deliveries")
        run(db, ";".join(restore), {}, log, "indexes and constraints")
        run(db, "VACUUM ANALYZE conversations_message, conversations_delivery", {}, log, "vacuum analyze")
        rows = db.execute("SELECT count(*) FROM conversations_delivery").fetchone()[0]  # type: ignore[index]
    return {"seconds": log, "rows": rows}
