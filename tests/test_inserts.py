"""ingestion.hotpath.inserts: rows that belong together are written at once (one statement on PostgreSQL, a
transaction elsewhere) and come back as ``save()`` leaves them. Run on whichever DATABASE_URL selects."""

import uuid
from datetime import UTC, datetime
from enum import Enum

import pytest
from django.db import IntegrityError, connection, models
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext
from django_tasks_db.models import DBTaskResult

from conversations.models import Delivery, Endpoint, Message, Role, Source
from delivery.tasks import deliver_message
from ingestion.hotpath.inserts import (
    Condition,
    Update,
    _Parameter,
    _parameters,
    _prepared,
    _references,
    insert_together,
    passed_unchanged,
)


def new_task_row(message_id: str) -> DBTaskResult:
    """A django-tasks-db task row, unsaved, as its backend's enqueue would write it: a third kind of row, with a
    pre_save receiver of its own (run_after), to write together with a message and its delivery."""
    backend = deliver_message.get_backend()
    return DBTaskResult(
        id=backend._get_id(),
        args_kwargs={"args": [message_id], "kwargs": {}},
        priority=deliver_message.priority,
        task_path=deliver_message.module_path,
        queue_name=deliver_message.queue_name,
        run_after=deliver_message.run_after,  # None: django-tasks-db fills it in on pre_save
        backend_name=backend.alias,
    )


@pytest.fixture
def database_tasks(settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


def new_rows(user, api_key=None, text="hello"):
    message = Message(
        conversation=user.conversation, role=Role.USER, source=Source.API, text=text, context={"n": 1}, api_key=api_key
    )
    delivery = Delivery(message=message, api_key=api_key, endpoint=Endpoint.CURRENT, backend="local")
    return message, delivery


def test_the_rows_are_written_and_left_as_save_leaves_them(user, v2, database_tasks):
    message, delivery = new_rows(user, v2[0])
    task_row = new_task_row(message.public_id)
    assert task_row is not None

    insert_together([message, delivery, task_row])

    stored = Delivery.objects.select_related("message").get()
    assert (stored.pk, stored.message.pk) == (delivery.pk, message.pk)
    assert stored.message.public_id == message.public_id
    assert (stored.message.text, stored.message.context, stored.message.api_key_id) == ("hello", {"n": 1}, v2[0].pk)
    assert delivery.message_id == message.pk and delivery.message is message  # key and cached object, as save()
    assert not any(row._state.adding for row in (message, delivery, task_row))
    assert stored.updated_at is not None and stored.updated_at == delivery.updated_at  # auto_now, via pre_save
    task = DBTaskResult.objects.get()
    assert task.pk == task_row.pk and task.args_kwargs == {"args": [message.public_id], "kwargs": {}}
    assert task.task_result.task.run_after is None  # django-tasks-db's own pre_save receiver filled run_after


def test_postgresql_gets_one_statement_and_other_databases_one_transaction(user, database_tasks):
    message, delivery = new_rows(user)
    with CaptureQueriesContext(connection) as captured:
        insert_together([message, delivery, new_task_row(message.public_id)])

    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    if connection.vendor == "postgresql":
        assert statements == ["WITH"]
    else:
        assert statements == ["SAVEPOINT", "INSERT", "INSERT", "INSERT", "RELEASE"]  # inside the test's transaction


@pytest.mark.django_db(transaction=True)
def test_when_one_row_fails_none_is_written(user, database_tasks):
    """A priority outside django-tasks-db's check constraint makes the last row fail: the message and its
    delivery before it must not be left behind (autocommit here, as in a request)."""
    message, delivery = new_rows(user)
    task_row = new_task_row(message.public_id)
    task_row.priority = 10_000
    assert connection.get_autocommit()

    with pytest.raises(IntegrityError):
        insert_together([message, delivery, task_row])

    assert (Message.objects.count(), Delivery.objects.count(), DBTaskResult.objects.count()) == (0, 0, 0)


@pytest.mark.parametrize("holds", [True, False])
def test_on_a_condition_every_row_or_none_is_written(user, database_tasks, holds):
    message, delivery = new_rows(user)
    task_row = new_task_row(message.public_id)
    written = []
    post_save.connect(
        lambda sender, **kwargs: written.append(sender), weak=False, dispatch_uid="test-inserts-condition"
    )
    user_table = connection.ops.quote_name(user._meta.db_table)
    # A condition with parameters of its own, before the rows' in the statement.
    condition = Condition(f"EXISTS (SELECT 1 FROM {user_table} u WHERE u.id = %s AND u.email = %s)", [user.pk, ""])
    if holds:
        user._meta.model.objects.filter(pk=user.pk).update(email="")
    try:
        assert insert_together([message, delivery, task_row], only_if=condition) is holds
    finally:
        post_save.disconnect(dispatch_uid="test-inserts-condition")

    counts = (Message.objects.count(), Delivery.objects.count(), DBTaskResult.objects.count())
    if holds:
        assert counts == (1, 1, 1)
        assert Delivery.objects.get().message_id == message.pk and DBTaskResult.objects.get().pk == task_row.pk
        assert len(written) == 3
    else:
        assert counts == (0, 0, 0)
        assert message.pk is None and delivery.pk is None and message._state.adding  # left as they were
        assert written == []


@pytest.mark.parametrize("holds", [True, False])
def test_updates_are_made_with_the_rows_and_only_if_they_are_written(user, holds):
    """The rows of other tables an ``Update`` matches are changed in the same statement (transaction elsewhere),
    only where its own condition also holds, and not at all when the batch's condition does not."""
    from django.contrib.auth import get_user_model

    users = get_user_model()
    other = users.objects.create(username="other", email="other@example.com")
    message, delivery = new_rows(user)
    user_table = connection.ops.quote_name(users._meta.db_table)
    batch_holds = Condition(f"EXISTS (SELECT 1 FROM {user_table} u WHERE u.id = %s)", [user.pk if holds else -1])
    renamed = Update(users, (("id", user.pk),), (("first_name", "Renamed"), ("is_staff", True)))
    # Its own condition, naming the updated table: true for `user`, false for `other`.
    own = Condition(f"{user_table}.{connection.ops.quote_name('email')} = %s", ["sam@example.com"])
    not_other = Update(users, (("id", other.pk),), (("first_name", "Changed"),), own)

    with CaptureQueriesContext(connection) as captured:
        assert insert_together([message, delivery], only_if=batch_holds, updates=[renamed, not_other]) is holds

    if connection.vendor == "postgresql":
        assert [q["sql"].split()[0] for q in captured.captured_queries] == ["WITH"]
    user.refresh_from_db()
    other.refresh_from_db()
    assert (user.first_name, user.is_staff) == (("Renamed", True) if holds else ("", False))
    assert other.first_name == ""
    assert Message.objects.count() == (1 if holds else 0)


def test_save_signals_are_sent_for_every_row(user):
    seen = []

    def before(sender, instance, **kwargs):
        seen.append(("pre", sender.__name__, instance.pk))

    def after(sender, instance, created, **kwargs):
        seen.append(("post", sender.__name__, created, instance.pk is not None))

    pre_save.connect(before, dispatch_uid="test-inserts-pre")
    post_save.connect(after, dispatch_uid="test-inserts-post")
    try:
        insert_together(list(new_rows(user)))
    finally:
        pre_save.disconnect(dispatch_uid="test-inserts-pre")
        post_save.disconnect(dispatch_uid="test-inserts-post")

    assert ("pre", "Message", None) in seen and ("pre", "Delivery", None) in seen
    assert ("post", "Message", True, True) in seen and ("post", "Delivery", True, True) in seen


def test_a_row_pointing_at_an_unsaved_row_outside_the_batch_is_refused(user):
    _, delivery = new_rows(user)

    with pytest.raises(ValueError, match="unsaved"):
        insert_together([delivery])  # its message is neither saved nor in the batch

    assert not Message.objects.exists() and not Delivery.objects.exists()


def test_a_row_may_point_at_a_saved_row(user):
    message, _ = new_rows(user)
    message.save()
    delivery = Delivery(message=message, endpoint=Endpoint.CONSOLE)

    insert_together([delivery])

    assert Delivery.objects.get().message_id == message.pk


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path, and its plan, are PostgreSQL's")
@pytest.mark.parametrize(
    ("field", "value"),
    [
        (models.CharField(max_length=8), "queued"),
        (models.TextField(), "a longer text ✓"),
        (models.BooleanField(), True),
        (models.UUIDField(), uuid.uuid4()),
        (Message._meta.get_field("conversation"), 42),  # a foreign key to a BigAutoField
        (models.DateTimeField(), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),  # aware
        (models.DateTimeField(null=True), None),
        (models.IntegerField(null=True), None),
        (models.PositiveIntegerField(null=True), None),
        (models.JSONField(null=True), None),  # SQL NULL, not JSON's null
        (models.CharField(max_length=8, null=True), None),
        (Delivery._meta.get_field("reply"), None),  # a one-to-one field that may be empty
        (Delivery._meta.get_field("api_key"), None),
    ],
)
def test_a_value_that_skips_preparing_is_what_the_field_itself_would_send(field, value):
    assert type(value) in passed_unchanged(field)

    prepared = field.get_db_prep_save(value, connection)

    assert prepared == value and type(prepared) is type(value)


@pytest.mark.parametrize(
    "field",
    [
        models.DateTimeField(auto_now=True),  # stamps the time
        models.DateTimeField(auto_now_add=True),
        models.JSONField(null=True),  # wrapped for the driver (but for None)
        models.EmailField(),  # a subclass: it may prepare differently
        models.IntegerField(),  # Django wraps the value (psycopg's Int4) for server-side binding
        models.PositiveIntegerField(),
    ],
)
def test_other_fields_always_take_their_own_path(field):
    assert passed_unchanged(field) in ((), (type(None),))


@pytest.mark.parametrize("field", [models.DateTimeField(), models.IntegerField(), models.JSONField()])
def test_none_takes_the_field_s_own_path_where_the_column_may_not_be_null(field):
    assert type(None) not in passed_unchanged(field)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path, and its plan, are PostgreSQL's")
def test_a_naive_time_takes_the_field_s_own_path(user, settings):
    settings.USE_TZ = True
    message = Message(conversation_id=user.conversation.pk, role="user", source="api", created_at=datetime(2026, 1, 2))
    field = Message._meta.get_field("created_at")
    parameter = _Parameter(0, field, field.attname, passed_unchanged(field))
    assert datetime in parameter.unchanged

    with pytest.warns(RuntimeWarning, match="naive datetime"):
        prepared = _prepared(message, parameter, connection)

    assert prepared.utcoffset() is not None  # made aware by the field, as save() would


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path, and its plan, are PostgreSQL's")
def test_every_parameter_of_an_accepted_message_is_what_the_field_itself_would_send(user, v2, database_tasks):
    message, delivery = new_rows(user, v2[0])
    rows = [message, delivery, new_task_row(message.public_id)]
    for row in rows:
        pre_save.send(type(row), instance=row, raw=False, using="default", update_fields=None)
    parameters = _parameters(tuple(type(row) for row in rows), _references(rows))

    skipped = 0
    for parameter in parameters:
        instance, field = rows[parameter.row], parameter.field
        if not isinstance(getattr(instance, parameter.attname), parameter.unchanged):
            continue  # the field's own path: nothing to compare
        expected = field.get_db_prep_save(field.pre_save(instance, add=True), connection)
        expected = expected.value if isinstance(expected, Enum) else expected
        got = _prepared(instance, parameter, connection)
        assert (got, type(got)) == (expected, type(expected)), field
        skipped += 1

    assert skipped >= 20  # most of the values: the plan is in use, not silently empty
