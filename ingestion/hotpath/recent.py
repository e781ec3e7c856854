"""Keys this process looked up lately, so that a key's next message needs no lookup of its own.

The key lookup is one of an accepted message's two statements: a round trip, and PostgreSQL's work to find the key,
its owner's thread and make model instances of them (about a tenth of the message's cost, docs/benchmarks.md).
A key that sends once usually sends again, so each gunicorn worker remembers the keys it found valid.

A remembered key is never taken on trust. It is *unconfirmed* until the message's own insert confirms it: the
statement writes the message only if the key still exists with that digest, is not revoked or expired, still has
the scope messages:send, its owner's account is still active and their thread is still the one remembered
(``still_holds``; ingestion.hotpath.inserts ``only_if``), and writes nothing otherwise. When it did not hold, or the
request ends in any other answer than the recorded message, the view looks the key up afresh before it answers
(ingestion/views.py). So revoking or deleting a key, or deactivating its account, takes effect from the next
request, as with a lookup every time.

What is remembered is the lookup's model instances, shared by the worker's threads: they are read, not changed,
except ``last_used_at``, which keys.services.note_key_used moves forward (so a busy key is still noted once per
resolution window). Entries expire after API_KEY_CACHE_SECONDS (0 switches remembering off), which bounds how long a
key's name or owner details read on this path may lag behind an edit, and at most API_KEY_CACHE_SIZE keys are kept
per process (the least recently used goes first). Only digests are keys here; no plaintext key is kept.
"""

from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model
from django.utils import timezone

from conversations.models import Conversation
from ingestion.hotpath.inserts import Condition
from ingestion.hotpath.lookup import column_of
from ingestion.hotpath.memo import Memo
from keys.models import ApiKey
from keys.scopes import Scope

_keys: Memo[str, ApiKey] = Memo()


def recall(digest: str) -> ApiKey | None:
    """The key remembered for this digest (unconfirmed), or None."""
    return _keys.recall(digest)


def remember(digest: str, key: ApiKey) -> None:
    """Remember a key just looked up and found valid (not revoked, its owner's thread loaded)."""
    if not key.is_revoked:
        _keys.remember(digest, key, settings.API_KEY_CACHE_SECONDS, settings.API_KEY_CACHE_SIZE)


def forget(digest: str) -> None:
    _keys.forget(digest)


def forget_all() -> None:
    _keys.forget_all()


class NoLongerHolds(Exception):
    """A remembered key did not hold when its message was to be written: nothing was written."""


def still_holds(key: ApiKey, conversation: Conversation) -> Condition:
    """The condition on which a message from a remembered key is written: the key, with the same digest, exists, is
    not revoked, has not expired and may still send (messages:send), its owner's account is active, and
    ``conversation`` is still its owner's."""
    scope = f"% {Scope.MESSAGES_SEND.value} %"
    return Condition(_still_holds_sql(), [key.pk, key.digest, timezone.now(), scope, conversation.pk])


@cache
def _still_holds_sql() -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name

    def column(model: type[Model], name: str) -> str:
        return str(quote(column_of(model, name)))

    # Names from the models' metadata; the values are parameters.
    owner, user = column(ApiKey, "owner"), column(Conversation, "user")
    user_model = get_user_model()
    users, user_id = quote(user_model._meta.db_table), column(user_model, user_model._meta.pk.name)
    return (
        f"EXISTS (SELECT 1 FROM {quote(ApiKey._meta.db_table)} k "  # noqa: S608
        f"JOIN {quote(Conversation._meta.db_table)} c ON c.{user} = k.{owner} "
        f"JOIN {users} u ON u.{user_id} = k.{owner} "
        f"WHERE k.{column(ApiKey, 'id')} = %s AND k.{column(ApiKey, 'digest')} = %s "
        f"AND k.{column(ApiKey, 'revoked_at')} IS NULL "
        f"AND (k.{column(ApiKey, 'expires_at')} IS NULL OR k.{column(ApiKey, 'expires_at')} > %s) "
        # the scope names are separated by spaces: padded, a name matches only whole
        f"AND (' ' || k.{column(ApiKey, 'scopes')} || ' ') LIKE %s "
        f"AND c.{column(Conversation, 'id')} = %s "
        f"AND u.{column(user_model, 'is_active')})"
    )
