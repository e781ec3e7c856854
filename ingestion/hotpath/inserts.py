"""New rows that belong together, written at once: on PostgreSQL in one statement, elsewhere by the ORM's own
saves inside one transaction.

An accepted message is three new rows (the message, its delivery record, the hand-off task). Through
``Model.objects.create`` each one is compiled anew and sent on its own between BEGIN and COMMIT: five round trips
and some 2,000 Python calls, half of an accepted request's work (docs/benchmarks.md). PostgreSQL inserts them in
one statement with data-modifying WITH queries, which is atomic by itself. The statement depends only on the
models, so it is written once per process; every value is prepared by its own field (``pre_save``, then
``get_db_prep_save``), as ``Model.save()`` prepares it.

It sends ``pre_save`` and ``post_save`` as ``save()`` does (django-tasks-db, for one, fills in a task row's
``run_after`` in a ``pre_save`` receiver). It skips nothing a model adds to saving: a model that overrides ``save()``
or one of the steps it runs (``own_save_steps``) is written by its own ``save()``, with the rest of its batch, in
one transaction (tests/test_hotpath.py fails if one of the request path's models gains such an override, since its
message would then cost the slower path).

Most values need no preparing at all: Django's own text, boolean, UUID and foreign key fields hand a value of
their own type to the database unchanged. For those the statement's plan notes the types that pass as they are,
and a value of such a type skips the field's three or four preparing calls (``_PASSED_UNCHANGED``); any other
value, and every other field, takes the field's own path.

A batch may be written on a condition (``only_if``: an SQL truth value, checked in the same statement on
PostgreSQL, in the same transaction elsewhere): then either every row is written or none is. The request path uses
it to confirm, in the insert itself, that a key it remembers still holds (ingestion/hotpath/recent.py).

A batch may also carry one more data-modifying statement (``also``, e.g. a DELETE that trims a log the batch adds
to): on PostgreSQL a further WITH query of the same statement, elsewhere run first in the same transaction. Either
way it sees the tables as they were before the batch's rows.

Existing rows may be changed with the batch (``updates``: columns set where other columns equal given values, and
where an optional condition of their own holds, as ``QuerySet.update`` does, without signals): on PostgreSQL in the
same statement, elsewhere in the same transaction, and only if the rows are written. A channel's message uses it to
stamp its address's last inbound time (channels/inbound.py).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    OneToOneField,
    PositiveIntegerField,
    TextField,
    UUIDField,
)
from django.db.models.signals import post_save, pre_save

from ingestion.hotpath.db import fetch_one

# A foreign key whose target is an earlier, unsaved row of the same batch: (row, the field's name, that row)
Reference = tuple[int, str, int]


@dataclass(frozen=True)
class Condition:
    """An SQL truth value with its %s parameters, e.g. ``EXISTS (SELECT 1 FROM t WHERE t.id = %s)``: the rows are
    written only if it holds. The SQL is part of the statement written once per process, so it must not vary with
    the values: those go in ``params``."""

    sql: str
    params: Sequence[Any]


@dataclass(frozen=True)
class Update:
    """``UPDATE model SET values WHERE where [AND condition]``, ``values`` and ``where`` each a tuple of (field name,
    value) pairs, made with the batch. The field names and the condition's SQL (which may name the model's table) are
    part of the statement written once per process; the values are parameters."""

    model: type[Model]
    where: tuple[tuple[str, Any], ...]
    values: tuple[tuple[str, Any], ...]
    condition: Condition | None = None

    @property
    def shape(self) -> "UpdateShape":
        names = tuple(name for name, _ in self.where), tuple(name for name, _ in self.values)
        return self.model, *names, None if self.condition is None else self.condition.sql

    def parameters(self, connection: Any) -> list[Any]:
        """The SET values as their fields would save them, the WHERE values as their fields would look them up, then
        the condition's."""
        saved = [_field(self.model, name).get_db_prep_save(value, connection) for name, value in self.values]
        looked_up = [
            _field(self.model, name).get_db_prep_value(value, connection, prepared=False) for name, value in self.where
        ]
        return [_plain(value) for value in (*saved, *looked_up, *(self.condition.params if self.condition else ()))]


# (model, the WHERE fields, the SET fields, the condition's SQL)
UpdateShape = tuple[type[Model], tuple[str, ...], tuple[str, ...], str | None]


@cache
def _update_sql(shape: UpdateShape, gated: bool) -> str:
    """The UPDATE alone; ``gated``: only if the batch's condition held (``g``, in the same WITH)."""
    model, matched, assigned, condition = shape
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name

    def column(name: str) -> str:
        found = _field(model, name).column
        assert found is not None  # concrete fields have one
        return str(quote(found))

    assignments = ", ".join(f"{column(name)} = %s" for name in assigned)
    tests = [f"{column(name)} = %s" for name in matched]
    if condition is not None:
        tests.append(f"({condition})")
    if gated:
        tests.append("EXISTS (SELECT 1 FROM g)")
    # Table and column names come from the model's metadata; every value is a parameter.
    return f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {' AND '.join(tests)}"  # noqa: S608


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)  # a concrete field, not a relation's other side
    return field


# Django's own field classes (exactly these, not subclasses, which may prepare differently) whose pre_save reads the
# attribute and whose get_db_prep_save gives back a value of these exact types unchanged on PostgreSQL: text
# fields return a str from to_python, UUIDField the UUID (native on PostgreSQL), BooleanField the bool, DateTimeField
# an aware datetime (``_prepared`` sends a naive one, which Django converts, its own way; a field that stamps the
# time in pre_save, auto_now or auto_now_add, always takes it). Not here: integer fields (Django wraps their values in
# psycopg's Int2/Int4/Int8 for server-side binding). tests/test_inserts.py checks every pair against the field's own
# path.
_PASSED_UNCHANGED: dict[type[Field[Any, Any]], tuple[type, ...]] = {
    CharField: (str,),
    TextField: (str,),
    BooleanField: (bool,),
    UUIDField: (uuid.UUID,),
    DateTimeField: (datetime,),
}
# Django's own field classes whose get_db_prep_save gives None back for None (SQL NULL; for JSONField too: JSON's
# null takes Value(None, JSONField())), where the column may be NULL: most of a new delivery's columns.
_NONE_PASSES = (
    CharField, TextField, BooleanField, UUIDField, DateTimeField, IntegerField, PositiveIntegerField,
    BigIntegerField, JSONField, ForeignKey, OneToOneField,
)  # fmt: skip
_AUTO_KEYS = (AutoField, BigAutoField)
# What Model.save() runs on the way to its INSERT, all of which the one statement replaces.
_SAVE_STEPS = ("save", "save_base", "_save_parents", "_save_table", "_do_insert")


def own_save_steps(model: type[Model]) -> list[str]:
    """The steps of ``Model.save()`` this model overrides (or a parent of it does): the statement would skip them."""
    return [name for name in _SAVE_STEPS if getattr(model, name) is not getattr(Model, name)]


@cache
def _saved_by_statement(models: tuple[type[Model], ...]) -> bool:
    return not any(own_save_steps(model) for model in models)


def passed_unchanged(field: Field[Any, Any]) -> tuple[type, ...]:
    """The value types this field hands to the database as they are (empty: always take the field's own path)."""
    if isinstance(field, DateTimeField) and (field.auto_now or field.auto_now_add):
        return ()  # its pre_save stamps the time
    if type(field) is ForeignKey:
        # A foreign key prepares a value as its target field does: an integer key passes unchanged.
        found: tuple[type, ...] = (int,) if type(field.target_field) in _AUTO_KEYS else ()
    else:
        found = _PASSED_UNCHANGED.get(type(field), ())
    if field.null and type(field) in _NONE_PASSES:
        found = (*found, type(None))
    return found


@dataclass(frozen=True)
class _Parameter:
    row: int
    field: Field[Any, Any]
    attname: str
    unchanged: tuple[type, ...]  # value types that need no preparing


@dataclass(frozen=True)
class _Table:
    """How one model's rows are inserted."""

    fields: list[Field[Any, Any]]  # the columns written, in order
    returned: Field[Any, Any] | None  # the primary key the database assigns, if it does
    foreign_keys: list[ForeignKey]  # to look for references to other rows of the batch

    def __post_init__(self) -> None:
        for field in self.fields:
            if hasattr(field, "get_placeholder"):  # a field that needs its own SQL around the value
                raise TypeError(f"{field} cannot be inserted by ingestion.hotpath.inserts")


@cache
def _table(model: type[Model]) -> _Table:
    meta = model._meta
    if meta.parents:
        raise TypeError(f"{model.__name__}: multi-table inheritance is not supported")
    fields = [field for field in meta.local_concrete_fields if field is not meta.auto_field]
    foreign_keys = [field for field in fields if isinstance(field, ForeignKey)]  # OneToOneField included
    return _Table(fields, meta.auto_field, foreign_keys)


@cache
def _parameters(models: tuple[type[Model], ...], references: tuple[Reference, ...]) -> list[_Parameter]:
    """The statement's parameters in order: every written field but the keys that point at an earlier row."""
    pointed = {(row, name) for row, name, _ in references}
    return [
        _Parameter(row, field, field.attname, passed_unchanged(field))
        for row, model in enumerate(models)
        for field in _table(model).fields
        if (row, field.name) not in pointed
    ]


def _prepared(instance: Model, parameter: _Parameter, connection: Any) -> Any:
    if parameter.unchanged:
        value = getattr(instance, parameter.attname)
        if type(value) in parameter.unchanged and (type(value) is not datetime or value.utcoffset() is not None):
            return value  # (a naive datetime is converted by the field)
        if isinstance(value, Enum) and type(value.value) in parameter.unchanged:
            return value.value  # a choices member (TextChoices is a str subclass): what to_python keeps, unwrapped
    field = parameter.field
    return _plain(field.get_db_prep_save(field.pre_save(instance, add=True), connection))


def _plain(value: Any) -> Any:
    # A choices member as its plain value: psycopg finds the adapter of a subclass by walking its MRO on every
    # statement, half the cost of adapting all the parameters.
    return value.value if isinstance(value, Enum) else value


@cache
def _statement(
    models: tuple[type[Model], ...],
    references: tuple[Reference, ...],
    condition: str | None,
    also: str | None = None,
    updates: tuple[UpdateShape, ...] = (),
) -> str:
    """WITH r0 AS (INSERT … RETURNING id), r1 AS (INSERT … VALUES (…, (SELECT id FROM r0), …)) … SELECT ids.

    On a condition: WITH g AS (SELECT 1 WHERE condition), r0 AS (INSERT … SELECT … FROM g RETURNING id), …
    SELECT EXISTS (SELECT 1 FROM g), ids: every row is selected from g, so when it is empty none is written. (The
    values of INSERT … SELECT take their columns' types as those of VALUES do.)

    Updates follow the inserts: u0 AS (UPDATE … SET … WHERE … AND EXISTS (SELECT 1 FROM g)), the last part only on a
    condition; then ``also``. (PostgreSQL runs every data-modifying part of a WITH once and to the end, read or not.)
    """
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name

    def column(field: Field[Any, Any]) -> str:
        assert field.column is not None  # concrete fields have one
        return str(quote(field.column))

    referenced = {(row, name): target for row, name, target in references}
    queries, returned = [], []
    if condition is not None:
        queries.append(f"g AS (SELECT 1 WHERE {condition})")
        returned.append("EXISTS (SELECT 1 FROM g)")
    for row, model in enumerate(models):
        table = _table(model)
        values = []
        for field in table.fields:
            target = referenced.get((row, field.name))
            if target is None:
                values.append("%s")
            else:
                target_pk = _table(models[target]).returned
                assert target_pk is not None  # _references only points at rows whose key the database assigns
                values.append(f"(SELECT {column(target_pk)} FROM r{target})")  # noqa: S608 (names only)
        columns = ", ".join(column(field) for field in table.fields)
        returning = ""
        if table.returned is not None:
            returning = f" RETURNING {column(table.returned)}"
            returned.append(f"(SELECT {column(table.returned)} FROM r{row})")  # noqa: S608 (names only)
        listed = ", ".join(values)
        source = f"VALUES ({listed})" if condition is None else f"SELECT {listed} FROM g"  # noqa: S608 (names only)
        queries.append(f"r{row} AS (INSERT INTO {quote(model._meta.db_table)} ({columns}) {source}{returning})")
    gated = condition is not None
    queries.extend(f"u{number} AS ({_update_sql(shape, gated)})" for number, shape in enumerate(updates))
    if also is not None:
        # Unconditional: when the rows are not written (a condition that fails) the batch is refused anyway.
        queries.append(f"also AS ({also})")
    # Table and column names come from the models' metadata; every value is a parameter.
    return f"WITH {', '.join(queries)} SELECT {', '.join(returned) or 'NULL'}"


def _references(rows: Sequence[Model]) -> tuple[Reference, ...]:
    """Foreign keys that point at an earlier row of the batch: its key is known only once it is inserted."""
    found = []
    for row, instance in enumerate(rows):
        for field in _table(type(instance)).foreign_keys:
            if not field.is_cached(instance):
                continue
            target = field.get_cached_value(instance)
            if target is None or target.pk is not None:
                continue
            earlier = [index for index in range(row) if rows[index] is target]
            if not earlier or _table(type(target)).returned is None:
                raise ValueError(f"{type(instance).__name__}.{field.name} points at an unsaved row outside the batch")
            found.append((row, field.name, earlier[0]))
    return tuple(found)


def insert_by_saves(
    rows: Sequence[Model],
    only_if: Condition | None = None,
    also: Condition | None = None,
    updates: Sequence[Update] = (),
) -> bool:
    """What ``insert_together`` does on other databases: each row's own ``save()``, in one transaction."""
    connection = connections[DEFAULT_DB_ALIAS]
    with transaction.atomic():
        if only_if is not None and fetch_one(connection, f"SELECT 1 WHERE {only_if.sql}", only_if.params) is None:
            return False
        if also is not None:
            with connection.cursor() as cursor:
                cursor.execute(also.sql, also.params)
        for instance in rows:
            instance.save(force_insert=True)
        for update in updates:
            with connection.cursor() as cursor:
                cursor.execute(_update_sql(update.shape, False), update.parameters(connection))
    return True


def insert_together(
    rows: Sequence[Model],
    only_if: Condition | None = None,
    also: Condition | None = None,
    updates: Sequence[Update] = (),
) -> bool:
    """Insert new model instances (in order: a row may point at an earlier one) all at once or not at all, and
    set their primary keys and foreign keys as ``save()`` would. With ``only_if``, only if that holds: returns
    whether the rows were written (when not, they are left unsaved and no post_save is sent; on PostgreSQL
    pre_save has been, since the condition is checked by the statement itself). ``also``: one more data-modifying
    SQL statement (its %s parameters in ``params``), run with the rows, seeing the tables as they were before them.
    ``updates`` are made with the rows, and only if they are written."""
    connection = connections[DEFAULT_DB_ALIAS]
    models = tuple(type(instance) for instance in rows)
    if connection.vendor != "postgresql" or not _saved_by_statement(models):
        return insert_by_saves(rows, only_if, also, updates)
    for instance in rows:
        pre_save.send(type(instance), instance=instance, raw=False, using=DEFAULT_DB_ALIAS, update_fields=None)
    references = _references(rows)
    params = [_prepared(rows[p.row], p, connection) for p in _parameters(models, references)]
    shapes = tuple(update.shape for update in updates)
    for update in updates:  # their WITH queries come after the rows', before ``also``
        params.extend(update.parameters(connection))
    also_sql, also_params = (None, []) if also is None else (also.sql, list(also.params))
    if only_if is None:
        keys = fetch_one(connection, _statement(models, references, None, also_sql, shapes), [*params, *also_params])
    else:
        statement = _statement(models, references, only_if.sql, also_sql, shapes)
        keys = fetch_one(connection, statement, [*only_if.params, *params, *also_params])
        if keys is None or not keys[0]:
            return False
        keys = keys[1:]  # after the condition's truth
    assigned = iter(keys or ())
    for instance in rows:
        returned = _table(type(instance)).returned
        if returned is not None:
            setattr(instance, returned.attname, next(assigned))
        instance._state.adding = False
        instance._state.db = DEFAULT_DB_ALIAS
    for row, name, target in references:
        setattr(rows[row], name, rows[target])  # the key column and the cached object, as save() leaves them
    for instance in rows:
        post_save.send(
            type(instance), instance=instance, created=True, update_fields=None, raw=False, using=DEFAULT_DB_ALIAS
        )
    return True
