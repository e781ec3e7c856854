"""The key lookup of every API request: one indexed query that also brings the key's owner (only their id, which
the key row holds, and whether the account is active; the rest is deferred) and their thread (and, for the legacy
endpoint, their profile), with its SQL written once per process.

Through the ORM (``select_related(...).get(digest=...)``) Django compiles the same joined SELECT again on every
request: some 1,500 Python calls, a fifth of an accepted request's Python work (docs/benchmarks.md). The statement
depends only on the models, so it is built once from their metadata; the rows become model instances through
``Model.from_db`` with the same value converters the ORM applies, and are linked the way ``select_related`` links
them, so callers see exactly what the ORM query gave them.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model, OneToOneField

from accounts.models import Profile
from conversations.models import Conversation
from ingestion.hotpath.db import fetch_one
from keys.models import ApiKey

Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class _Part:
    """One model's columns in the joined row."""

    model: type[Model]
    names: list[str]  # attribute names, in column order
    converters: list[tuple[int, list[Converter], Any]]  # (column, converters, expression) where any apply

    def load(self, values: Sequence[Any], connection: Any) -> Model | None:
        values = list(values)
        if values[0] is None:  # an outer join found no row
            return None
        for index, converters, expression in self.converters:
            for convert in converters:
                values[index] = convert(values[index], expression, connection)
        return self.model.from_db(DEFAULT_DB_ALIAS, self.names, values)


def _part(model: type[Model], alias: str, connection: Any) -> tuple[_Part, str]:
    fields: list[Field[Any, Any]] = [f for f in model._meta.concrete_fields]  # primary key first
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(alias)
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if found:
            converters.append((index, found, column))
    quote = connection.ops.quote_name
    select = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    return _Part(model, [field.attname for field in fields], converters), select


@cache
def _statement(with_profile: bool) -> tuple[str, list[_Part]]:
    connection = connections[DEFAULT_DB_ALIAS]
    quote = connection.ops.quote_name
    owner_id = f"k.{quote(column_of(ApiKey, 'owner'))}"
    user_model = get_user_model()
    # Of the owner's row only whether the account is active (a deactivated account's keys are refused); the owner
    # is built from the key's own owner_id and that flag (key_with_owner).
    key_part, key_select = _part(ApiKey, "k", connection)
    users = f"{quote(user_model._meta.db_table)} u"
    active = f"u.{quote(column_of(user_model, 'is_active'))}"
    parts, selects = [key_part], [key_select, active]
    sources = [
        f"{quote(ApiKey._meta.db_table)} k",
        f"JOIN {users} ON u.{quote(column_of(user_model, user_model._meta.pk.name))} = {owner_id}",
    ]
    for model, alias in [(Conversation, "c"), *([(Profile, "p")] if with_profile else [])]:
        part, select = _part(model, alias, connection)
        parts.append(part)
        selects.append(select)
        own_user_id = f"{alias}.{quote(column_of(model, 'user'))}"
        sources.append(f"LEFT OUTER JOIN {quote(model._meta.db_table)} {alias} ON {own_user_id} = {owner_id}")
    # Table and column names come from the models' metadata; the digest is the statement's only parameter.
    sql = (
        f"SELECT {', '.join(selects)} FROM {' '.join(sources)} "  # noqa: S608
        f"WHERE k.{quote(column_of(ApiKey, 'digest'))} = %s"
    )
    return sql, parts


def column_of(model: type[Model], name: str) -> str:
    """The column of a model's field, by the field's name."""
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column
    return field.column


def key_with_owner(digest: str, *, with_profile: bool = False) -> ApiKey | None:
    """The key with this digest, revoked or not, its owner (only the id and is_active loaded) and their
    conversation (and profile) loaded; or None."""
    sql, parts = _statement(with_profile)
    connection = connections[DEFAULT_DB_ALIAS]
    row = fetch_one(connection, sql, [digest])
    if row is None:
        return None
    key_columns = len(parts[0].names)
    is_active = row[key_columns]
    row = (*row[:key_columns], *row[key_columns + 1 :])
    instances, start = [], 0
    for part in parts:
        instances.append(part.load(row[start : start + len(part.names)], connection))
        start += len(part.names)
    key, thread = instances[0], instances[1]
    assert isinstance(key, ApiKey)
    # The owner is only who the request is for: an API request never reads their name, email or password hash. So
    # the User holds just the id the key row already carries and whether the account is active; every other field
    # is deferred, loaded by the ORM if something reads it.
    user_model = get_user_model()
    owner = user_model.from_db(
        DEFAULT_DB_ALIAS, [user_model._meta.pk.attname, "is_active"], [key.owner_id, bool(is_active)]
    )
    ApiKey._meta.get_field("owner").set_cached_value(key, owner)
    _link_one_to_one(Conversation, owner, thread)
    if with_profile:
        _link_one_to_one(Profile, owner, instances[2])
    return key


def _link_one_to_one(model: type[Model], owner: Model, related: Model | None) -> None:
    """Cache both directions of a user's one-to-one row, as select_related does (None: accessing it raises)."""
    field = model._meta.get_field("user")
    if not isinstance(field, OneToOneField):
        raise TypeError(f"{model.__name__}.user is not a one-to-one field")
    field.remote_field.set_cached_value(owner, related)
    if related is not None:
        field.set_cached_value(related, owner)
