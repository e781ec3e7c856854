"""One statement, one row: through the database backend's own fast path where it has one (ingestion/hotpath/postgresql),
else through Django's cursor."""

from collections.abc import Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper


def fetch_one(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    fast = getattr(connection, "fetch_one", None)
    if fast is not None:
        return fast(sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()
