"""Who wrote: a linked address with its person and their thread, found in one statement and remembered for a while
by each process, as API keys are (ingestion/hotpath/recent.py).

A provider's webhook carries the sender's address on every message, and a person who writes once usually writes
again. Through the ORM (``select_related("user__conversation")``) the lookup was compiled anew for each message, some
1,300 Python calls; it is written once per process here, from the models' metadata, and the rows become a deferred
User (its id and whether the account is active) with their Conversation linked, as ``select_related`` links them.

A remembered sender is never taken on trust: the statement that records the message also checks that the address is
still linked (the same row: unlinking deletes it, and linking again makes a new one) to the same person, whose
account is still active and whose thread is the one remembered (``still_linked``); it writes nothing otherwise, and
channels/inbound.py then looks again. So unlinking an address or deactivating
an account takes effect from the next message, in every process, as with a lookup every time.

At most CHANNEL_SENDER_CACHE_SIZE addresses are remembered per process, each for CHANNEL_SENDER_CACHE_SECONDS (0
switches remembering off); the least recently used goes first. Nothing here is a secret: addresses and row ids.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

from channels.models import LinkedAddress
from conversations.models import Conversation
from ingestion.hotpath.db import fetch_one
from ingestion.hotpath.inserts import Condition, Update
from ingestion.hotpath.memo import Memo

# How stale an address's last inbound time may be left while the person keeps writing from it (see ``heard_from``).
STAMP_RESOLUTION = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Sender:
    """A linked address's row id and its person: a User with only ``pk`` and ``is_active`` loaded, their thread (if
    they have one) cached on it. Shared by a process's threads: read, never changed."""

    address_id: int
    user: User
    conversation_id: int | None


_senders: Memo[tuple[str, str], Sender] = Memo()


def recall(channel: str, address: str) -> Sender | None:
    """The sender remembered for this address (unconfirmed), or None."""
    return _senders.recall((channel, address))


def remember(channel: str, address: str, sender: Sender) -> None:
    """Remember a sender just looked up: linked, active, with a thread."""
    if sender.user.is_active and sender.conversation_id is not None:
        seconds, size = settings.CHANNEL_SENDER_CACHE_SECONDS, settings.CHANNEL_SENDER_CACHE_SIZE
        _senders.remember((channel, address), sender, seconds, size)


def forget(channel: str, address: str) -> None:
    _senders.forget((channel, address))


def forget_all() -> None:
    _senders.forget_all()


def look_up(channel: str, address: str) -> Sender | None:
    """The address's link, its person and their thread, in one statement; None when it is not linked."""
    connection = connections[DEFAULT_DB_ALIAS]
    row = fetch_one(connection, _lookup_sql(), [channel, address])
    if row is None:
        return None
    address_id, user_id, is_active, conversation_id = row
    user_model = get_user_model()
    # Only who wrote and whether their account is active: the rest of the users row is deferred (as for a key's
    # owner, ingestion/hotpath/lookup.py), loaded by the ORM if something reads it.
    user = user_model.from_db(DEFAULT_DB_ALIAS, [user_model._meta.pk.attname, "is_active"], [user_id, bool(is_active)])
    field = Conversation._meta.get_field("user")
    thread = None
    if conversation_id is not None:
        names = [Conversation._meta.pk.attname, _attname(Conversation, "user")]
        thread = Conversation.from_db(DEFAULT_DB_ALIAS, names, [conversation_id, user_id])
        field.set_cached_value(thread, user)
    field.remote_field.set_cached_value(user, thread)
    return Sender(address_id, user, conversation_id)


def still_linked(sender: Sender, channel: str, address: str) -> Condition:
    """The condition on which a message from this sender is recorded: the same link row still holds this address
    for the same person, whose account is active and whose thread is still the one known. (A provider's retry is
    stopped by the provider id's unique index instead, channels/inbound.py: a check of that table here would be
    planned once per connection, and a plan made while the table was nearly empty scans it all, ever longer.)"""
    return Condition(_still_linked_sql(), [sender.address_id, channel, address, sender.user.pk, sender.conversation_id])


def heard_from(sender: Sender, now: datetime) -> Update:
    """The address's last inbound time, made ``now`` with the message, unless it is within STAMP_RESOLUTION of now
    and no other address of the person's was written from since. Each stamp locks the address's row until its
    statement commits, so a person writing fast (or a provider delivering a burst) would make every message wait for
    the one before; skipping the stamps within a second keeps the two things it is read for: which of the person's
    addresses they wrote from last (exact: a stamp older than another address's is always moved), and WhatsApp's
    24-hour window (closed at most a second early, never late)."""
    field = LinkedAddress._meta.get_field("last_inbound_at")
    assert isinstance(field, Field)
    since = field.get_db_prep_value(now - STAMP_RESOLUTION, connections[DEFAULT_DB_ALIAS], prepared=False)
    stale = Condition(_stale_sql(), [since])
    return Update(LinkedAddress, (("id", sender.address_id),), (("last_inbound_at", now),), stale)


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column
    return str(connections[DEFAULT_DB_ALIAS].ops.quote_name(field.column))


def _attname(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return field.attname


def _table(model: type[Model]) -> str:
    return str(connections[DEFAULT_DB_ALIAS].ops.quote_name(model._meta.db_table))


@cache
def _lookup_sql() -> str:
    users = get_user_model()
    user_id = f"a.{_column(LinkedAddress, 'user')}"
    # Names from the models' metadata; the channel and the address are the parameters.
    return (
        f"SELECT a.{_column(LinkedAddress, 'id')}, {user_id}, u.{_column(users, 'is_active')}, "  # noqa: S608
        f"c.{_column(Conversation, 'id')} FROM {_table(LinkedAddress)} a "
        f"JOIN {_table(users)} u ON u.{_column(users, users._meta.pk.name)} = {user_id} "
        f"LEFT OUTER JOIN {_table(Conversation)} c ON c.{_column(Conversation, 'user')} = {user_id} "
        f"WHERE a.{_column(LinkedAddress, 'channel')} = %s AND a.{_column(LinkedAddress, 'address')} = %s"
    )


@cache
def _still_linked_sql() -> str:
    users = get_user_model()
    user_id = f"a.{_column(LinkedAddress, 'user')}"
    # Names from the models' metadata; every value is a parameter.
    return (
        f"EXISTS (SELECT 1 FROM {_table(LinkedAddress)} a "  # noqa: S608
        f"JOIN {_table(users)} u ON u.{_column(users, users._meta.pk.name)} = {user_id} "
        f"JOIN {_table(Conversation)} c ON c.{_column(Conversation, 'user')} = {user_id} "
        f"WHERE a.{_column(LinkedAddress, 'id')} = %s AND a.{_column(LinkedAddress, 'channel')} = %s "
        f"AND a.{_column(LinkedAddress, 'address')} = %s AND {user_id} = %s AND c.{_column(Conversation, 'id')} = %s "
        f"AND u.{_column(users, 'is_active')})"
    )


@cache
def _stale_sql() -> str:
    table, user = _table(LinkedAddress), _column(LinkedAddress, "user")
    stamp = _column(LinkedAddress, "last_inbound_at")
    # Names from the models' metadata; the moment is the parameter.
    return (
        f"{table}.{stamp} IS NULL OR {table}.{stamp} < %s OR EXISTS (SELECT 1 FROM {table} o "  # noqa: S608
        f"WHERE o.{user} = {table}.{user} AND o.{stamp} > {table}.{stamp})"
    )
