"""On PostgreSQL the connection prepares the statements it repeats, its health check sends nothing while the
connection is quiet, and the request path's statements run through fetch_one (config/settings.py,
ingestion/hotpath/postgresql/base.py, ingestion/hotpath/db.py, docs/benchmarks.md)."""

import select
import time

import psycopg
import pytest
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from ingestion.hotpath.db import fetch_one


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are a PostgreSQL setting")
def test_postgresql_prepares_repeated_statements():
    connection.ensure_connection()
    assert connection.connection.prepare_threshold == 5

    with connection.cursor() as cursor:
        for _ in range(6):
            cursor.execute("SELECT %s::int", [1])
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        (prepared,) = cursor.fetchone()

    assert prepared >= 1


def _start_of_a_request() -> None:
    """What Django does when a request starts with a persistent, health-checked connection."""
    connection.close_if_unusable_or_obsolete()
    assert not connection.health_check_done


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the quiet health check is PostgreSQL's backend")
def test_a_quiet_connection_is_reused_without_a_select_1():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement before the request'")
    reused = connection.connection
    _start_of_a_request()

    connection.close_if_health_check_failed()  # what the request's first query does first

    assert connection.connection is reused and connection.health_check_done
    with psycopg.connect(postgres_url_of(connection), autocommit=True) as admin:
        (last,) = admin.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s", [reused.info.backend_pid]
        ).fetchone()
    assert last == "SELECT 'the last statement before the request'"  # Django's own check would show SELECT 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the quiet health check is PostgreSQL's backend")
def test_a_connection_the_server_closed_is_replaced_before_the_request_uses_it():
    doomed, pid = _terminated_by_the_server()
    _start_of_a_request()

    with connection.cursor() as cursor:  # would raise on the terminated connection
        cursor.execute("SELECT pg_backend_pid()")
        (new_pid,) = cursor.fetchone()

    assert connection.connection is not doomed and new_pid != pid


def _terminated_by_the_server() -> tuple[psycopg.Connection, int]:
    """Django's connection and its backend's pid, after the server ended that backend (pg_terminate_backend)."""
    connection.ensure_connection()
    doomed = connection.connection
    pid = doomed.info.backend_pid
    with psycopg.connect(postgres_url_of(connection), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while not select.select([doomed.fileno()], [], [], 0.05)[0] and time.monotonic() < deadline:
        pass  # until the server's goodbye has reached this side
    return doomed, pid


def postgres_url_of(wrapper) -> str:
    settings = wrapper.settings_dict
    return f"postgresql://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="fetch_one's fast path is PostgreSQL's")


@pytest.mark.django_db
def test_fetch_one_gives_the_first_row_or_none():
    assert fetch_one(connection, "SELECT %s, %s", [7, "seven"]) == (7, "seven")
    assert fetch_one(connection, "SELECT 1 WHERE false", []) is None


@pytest.mark.django_db
@postgresql_only
def test_fetch_one_raises_djangos_error_classes():
    with pytest.raises(ProgrammingError):  # django.db's, which the API's 503 handling and callers catch
        fetch_one(connection, "SELECT no_such_column FROM keys_apikey", [])


@pytest.mark.django_db
@postgresql_only
def test_fetch_one_refuses_to_run_in_a_broken_transaction_as_djangos_cursor_does():
    with transaction.atomic():
        with pytest.raises(IntegrityError), transaction.atomic(savepoint=False):
            assert fetch_one(connection, "SELECT %s", [1]) == (1,)  # runs fine...
            raise IntegrityError("…then something fails inside the block")
        with pytest.raises(TransactionManagementError):
            fetch_one(connection, "SELECT 1", [])


@pytest.mark.django_db
def test_statements_through_fetch_one_are_logged_when_queries_are_watched():
    with CaptureQueriesContext(connection) as captured:
        fetch_one(connection, "SELECT %s", [4242])

    assert len(captured.captured_queries) == 1 and "4242" in captured.captured_queries[0]["sql"]


@pytest.mark.django_db(transaction=True)
@postgresql_only
def test_fetch_one_replaces_a_connection_the_server_closed():
    doomed, pid = _terminated_by_the_server()
    _start_of_a_request()

    (new_pid,) = fetch_one(connection, "SELECT pg_backend_pid()", []) or (None,)

    assert connection.connection is not doomed and new_pid not in (None, pid)
