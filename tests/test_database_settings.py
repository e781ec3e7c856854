"""On PostgreSQL the connection prepares the statements it repeats (config/settings.py, docs/benchmarks.md)."""

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
