"""What keeps the request path's bypasses (ingestion/hotpath) honest: the one-statement insert skips nothing a model
adds to saving, and the query-count tests count the statements production runs, not a fallback taken while they
watch."""

import pytest
from django.db import connection
from django.db.models.signals import pre_save
from django.test.utils import CaptureQueriesContext

from channels.models import InboundEvent
from conversations.models import Delivery, Endpoint, Message, Role, Source
from ingestion.hotpath import recording
from ingestion.hotpath.db import fetch_one
from ingestion.hotpath.inserts import insert_together, own_save_steps
from ingestion.models import TriggerFiring
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db

# Every model an accepted message writes through ingestion/hotpath/inserts.py.
HOT_PATH_MODELS = [Message, Delivery]  # the delivery row is the queue's entry: no task row (delivery/queue.py)
# And a channel's message from a linked address (channels/inbound.py): the provider's id with them.
CHANNEL_MODELS = [Message, Delivery, InboundEvent]

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the statement path (ingestion/hotpath/postgresql) is PostgreSQL's"
)


@pytest.fixture
def database_tasks(settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


class LoudMessage(Message):
    """A model that adds to saving, as a save() override: the insert must not skip it."""

    class Meta:
        proxy = True
        app_label = "hotpath_tests"  # not an installed app: no migration

    def save(self, *args, **kwargs):
        self.text = f"{self.text}!"
        super().save(*args, **kwargs)


def test_the_models_checked_here_are_the_ones_a_message_writes(user, database_tasks, monkeypatch):
    written: list[type] = []

    def watched(rows, only_if=None, also=None, updates=()):
        written.extend(type(row) for row in rows)
        return insert_together(rows, only_if, also, updates)

    monkeypatch.setattr(recording, "insert_together", watched)
    recording.record_user_message(user=user, endpoint=Endpoint.CURRENT, text="hi")

    assert written == HOT_PATH_MODELS, (
        f"an accepted message now writes {[model.__name__ for model in written]}: list exactly these in "
        "HOT_PATH_MODELS (tests/test_hotpath.py), so that each is checked below"
    )


def test_the_models_checked_here_are_the_ones_a_channel_message_writes(db, monkeypatch):
    from channels import inbound
    from channels.adapters.base import Inbound
    from channels.models import LinkedAddress
    from tests.factories import UserFactory

    LinkedAddress.objects.create(user=UserFactory(), channel="telegram", address="4242")
    written: list[type] = []

    def watched(rows, only_if=None, also=None, updates=()):
        written.extend(type(row) for row in rows)
        return insert_together(rows, only_if, also, updates)

    monkeypatch.setattr(recording, "insert_together", watched)
    assert inbound.receive("telegram", Inbound("1", "4242", "hi", [], None)).outcome == "recorded"

    assert written == CHANNEL_MODELS, (
        f"a channel's message now writes {[model.__name__ for model in written]}: list exactly these in "
        "CHANNEL_MODELS (tests/test_hotpath.py), so that each is checked below"
    )


# A webhook trigger's firing writes its delivery log's line with them (ingestion/trigger_log.py).
@pytest.mark.parametrize("model", [*HOT_PATH_MODELS, TriggerFiring, InboundEvent], ids=lambda model: model.__name__)
def test_no_model_on_the_request_path_adds_to_saving(model):
    assert own_save_steps(model) == [], (
        f"{model.__name__} overrides {own_save_steps(model)}: ingestion/hotpath/inserts.py then writes it by its own "
        "save(), the slower path every accepted message would take. Do it in a pre_save receiver (which the insert "
        "sends), or measure the cost (bench/instructions.py) and state it in ingestion/hotpath/__init__.py."
    )


def test_a_save_override_is_honoured(user):
    conversation = user.conversation
    loud = LoudMessage(conversation=conversation, role=Role.USER, source=Source.API, text="hi")

    assert insert_together([loud])

    assert Message.objects.get(pk=loud.pk).text == "hi!"


def test_what_a_pre_save_receiver_changes_is_written(user, database_tasks):
    def shout(sender, instance, **kwargs):
        instance.text = instance.text.upper()

    pre_save.connect(shout, sender=Message, dispatch_uid="test-hotpath-shout")
    try:
        message = recording.record_user_message(user=user, endpoint=Endpoint.CURRENT, text="hi")
    finally:
        pre_save.disconnect(sender=Message, dispatch_uid="test-hotpath-shout")

    assert Message.objects.get(pk=message.pk).text == "HI"


def _no_statement_through_djangos_cursor(monkeypatch):
    """Statements through Django's cursor fail (the query log may still use one to render a statement's text)."""
    djangos = connection.cursor

    def cursor(*args, **kwargs):
        wrapped = djangos(*args, **kwargs)

        def refuse(*args, **kwargs):
            raise AssertionError("the statement went through Django's cursor, not the request path's own")

        wrapped.execute = refuse
        return wrapped

    monkeypatch.setattr(connection, "cursor", cursor)


@postgresql_only
def test_watching_the_queries_does_not_switch_the_path(monkeypatch):
    _no_statement_through_djangos_cursor(monkeypatch)
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as captured:
        assert fetch_one(connection, "SELECT %s", [4242]) == (4242,)
    with connection.execute_wrapper(wrapper):
        assert fetch_one(connection, "SELECT %s", [4343]) == (4343,)

    assert len(captured.captured_queries) == 1 and "4242" in captured.captured_queries[0]["sql"]
    assert seen == ["SELECT %s"]


@postgresql_only
def test_the_counted_request_runs_the_production_path(client, v2, monkeypatch, django_assert_num_queries):
    assert post(client, CURRENT, v2[1], {"message": "warm up"}).status_code == 200  # the key is now remembered
    _no_statement_through_djangos_cursor(monkeypatch)

    with django_assert_num_queries(1):  # the key's check, the message and its delivery: one statement
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200
