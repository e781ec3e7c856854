"""Django's PostgreSQL backend with a health check that costs no round trip while the connection is quiet.

With CONN_HEALTH_CHECKS Django sends ``SELECT 1`` on a reused connection before each request's first query: a round
trip (and a thread switch in a gthread worker) on every API request, about a tenth of an accepted message's cost
(docs/benchmarks.md). An idle connection has nothing to read unless the server has spoken: it closed the
connection (restart, ``pg_terminate_backend``, idle timeout; the operating system then reports end of file) or sent
a notice. So the socket is polled first, without waiting; only when something is there does Django's own
``SELECT 1`` decide. A link that died silently is noticed by the request's first query either way.

It also runs the request path's two statements (the key lookup, the message's insert) with less client work
than Django's cursor wrapper: ``fetch_one`` below.
"""

import select
from collections.abc import Sequence
from typing import Any

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self) -> None:
        django_wrapper: Any = self  # the health-check attributes, which Django's type stubs leave out
        due = (
            self.connection is not None and django_wrapper.health_check_enabled and not django_wrapper.health_check_done
        )
        if due and self._idle_and_silent():
            django_wrapper.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _idle_and_silent(self) -> bool:
        connection = self.connection
        if connection.closed or connection.broken:
            return False
        poller = select.poll()
        poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)

    def fetch_one(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run one statement and return its first row, doing what Django's cursor does around it (health check,
        connection, thread and broken-transaction checks, Django's error classes) without its cursor wrapper.

        Django's wrapper costs about a third as much client work again as the statement itself (callgrind: 166,000
        against 122,000 instructions for a one-row SELECT), twice per accepted message. When something watches the
        queries (DEBUG's query log, CaptureQueriesContext and so the query-count tests, an execute_wrapper), the
        statement is shown to it as Django's cursor shows it (the execute wrappers, the query log) on this same path:
        what the tests count is what production runs.
        """
        self.close_if_health_check_failed()
        self.ensure_connection()
        self.validate_thread_sharing()
        self.validate_no_broken_transaction()
        with self.wrap_database_errors, self.create_cursor() as cursor:
            if self.queries_logged:
                self.make_debug_cursor(cursor).execute(sql, params)
            elif self.execute_wrappers:
                self.make_cursor(cursor).execute(sql, params)
            else:
                cursor.execute(sql, params)
            return cursor.fetchone()
