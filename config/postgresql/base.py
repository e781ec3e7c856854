"""Django's PostgreSQL backend with a health check that costs no round trip while the connection is quiet.

With CONN_HEALTH_CHECKS Django sends ``SELECT 1`` on a reused connection before each request's first query: a round
trip (and a thread switch in a gthread worker) on every API request, about a tenth of an accepted message's cost
(docs/benchmarks.md). An idle connection has nothing to read unless the server has spoken: it closed the
connection (restart, ``pg_terminate_backend``, idle timeout; the operating system then reports end of file) or sent
a notice. So the socket is polled first, without waiting; only when something is there does Django's own
``SELECT 1`` decide. A link that died silently is noticed by the request's first query either way.
"""

import select
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
