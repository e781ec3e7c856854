"""On PostgreSQL the connection prepares the statements it repeats, and its health check sends nothing while the
connection is quiet (config/settings.py, config/postgresql/base.py, docs/benchmarks.md)."""

import select
import time

import psycopg
import pytest
from django.db import connection


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
    connection.ensure_connection()
    doomed = connection.connection
    pid = doomed.info.backend_pid
    with psycopg.connect(postgres_url_of(connection), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while not select.select([doomed.fileno()], [], [], 0.05)[0] and time.monotonic() < deadline:
        pass  # until the server's goodbye has reached this side
    _start_of_a_request()

    with connection.cursor() as cursor:  # would raise on the terminated connection
        cursor.execute("SELECT pg_backend_pid()")
        (new_pid,) = cursor.fetchone()

    assert connection.connection is not doomed and new_pid != pid


def postgres_url_of(wrapper) -> str:
    settings = wrapper.settings_dict
    return f"postgresql://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
