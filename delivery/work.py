"""The kinds of background work one worker process runs (``manage.py worker``, ``manage.py serve``), each with its
own concurrency setting:

- ``deliveries``: messages handed to the assistant (delivery/engine.py; DELIVERY_CONCURRENCY attempts in flight);
- ``channels``: the outbox sent to people's phones (channels/outbound/sender.py; CHANNEL_CONCURRENCY sends);
- ``tasks``: ordinary django.tasks tasks kept in the database, reminders among them (django-tasks-db's loop, one
  task at a time);
- ``housekeeping``: approvals that expire, reminders a lost task left unfired, prunes (delivery/housekeeping.py,
  every HOUSEKEEPING_SECONDS).

Each kind is a ``Runner``. The first two are queues with many attempts in flight (delivery/queue_worker.py), built
by the app that owns them and registered here (channels sits above delivery in the layers, so it registers its
sender from its AppConfig); the tasks are django-tasks-db's loop, used through its public ``Worker`` (``TaskLoop``);
the housekeeping is delivery/housekeeping.py's ``Housekeeper``. ``manage.py worker`` and ``manage.py serve`` build the
same ``Runners``, start them, stop them together on SIGTERM (each with its own grace period, at the same time) and,
for ``--batch``, drain them. Why the tasks keep django-tasks-db's loop rather than a queue of their own:
docs/explanation/delivery.md, "Tasks beside the queues"."""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from django.db import DatabaseError, connection
from django.tasks.signals import task_finished
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker

from delivery.housekeeping import Housekeeper
from delivery.tasks import deliver_message, queued_in_database

KINDS = ("deliveries", "channels", "tasks", "housekeeping")
QUEUES = ("deliveries", "channels")

logger = logging.getLogger("delivery.handoff")

# How long the task loop waits, when no task is due, before it looks again. The answers to a phone's approval
# ("Approved: ...") and a channel's other notices are tasks, so a person who answered waits up to this long for the
# confirmation: django-tasks-db's 1 s made it 0.9 to 1.1 s (bench/approval_latency.py). A look when idle is one
# indexed query.
TASK_POLL_SECONDS = 0.2


class Runner(Protocol):
    """A kind of background work run by threads of this process."""

    def start(self) -> None:
        """Claim and attempt until stopped."""

    def begin_stop(self) -> None:
        """Claim nothing more and start nothing claimed ahead; what is in flight goes on, its leases renewed."""

    def stop(self, grace: float | None = None) -> None:
        """``begin_stop``, wait for what is in flight until the grace period ends, put back the rest uncounted."""

    def stop_now(self) -> None:
        """Put back what is in flight at once (a second SIGTERM)."""

    def drain(self) -> int:
        """Without threads: attempt everything claimable now, then return how many ran (``--batch``)."""


# kind -> build(concurrency or None for its setting) -> a runner, or None when there is nothing to run (no channel
# configured, deliveries handed off by another backend).
_builders: dict[str, Callable[[int | None], Runner | None]] = {}


def register(kind: str, build: Callable[[int | None], Runner | None]) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r}; one of {', '.join(KINDS)}")
    _builders[kind] = build


def selection(only: str) -> list[str]:
    """``--only deliveries,channels`` as a list of kinds, in KINDS' order; every kind when empty."""
    if not only.strip():
        return list(KINDS)
    chosen = {part.strip() for part in only.split(",") if part.strip()}
    unknown = chosen - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kind(s) of work: {', '.join(sorted(unknown))}; choose among {', '.join(KINDS)}")
    return [kind for kind in KINDS if kind in chosen]


class TaskLoop:
    """The ordinary django.tasks tasks kept in the database (reminders, notices, sign-up mails), one at a time, by
    django-tasks-db's own loop through its public API (``Worker.run``; ``running = False`` stops it after the task in
    progress), on a thread of this process. A database error (an outage, a lost connection), which would end that
    loop, is waited out, as the queues' claimers do."""

    def __init__(self, *, backend_name: str, interval: float = TASK_POLL_SECONDS, **options: Any) -> None:
        self._options: dict[str, Any] = {
            "queue_names": ["default"],
            "backend_name": backend_name,
            "interval": interval,
            "startup_delay": False,
            "max_tasks": None,
            "worker_id": get_random_string(32),  # unique across the workers, as django-tasks-db's own default
            "excluded_queue_names": [],
        } | options
        self._worker = self._new(batch=False)
        self._thread: threading.Thread | None = None
        self._hurry = threading.Event()

    def _new(self, *, batch: bool) -> Worker:
        return Worker(batch=batch, **self._options)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="task-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        while self._worker.running:
            try:
                self._worker.run()
                return
            except DatabaseError as error:
                failures += 1
                logger.warning("task loop: the database failed (%s); trying again", type(error).__name__)
                connection.close()
                time.sleep(min(0.5 * 2**failures, 5.0))
        connection.close()

    def begin_stop(self) -> None:
        self._worker.running = False  # the task in progress finishes; no other starts

    def stop(self, grace: float | None = None) -> None:
        """Let the task in progress finish (as django-tasks-db's own worker does), unless ``stop_now`` comes."""
        self.begin_stop()
        while self._thread is not None and self._thread.is_alive() and not self._hurry.is_set():
            self._thread.join(0.1)

    def stop_now(self) -> None:
        self._hurry.set()

    def drain(self) -> int:
        """The tasks ready now (at most ``max_tasks``), in the calling thread; returns how many ran."""
        ran: list[object] = []

        def count(**kwargs: Any) -> None:
            ran.append(kwargs)

        task_finished.connect(count, weak=False)
        try:
            self._new(batch=True).run()
        finally:
            task_finished.disconnect(count)
        return len(ran)


class Runners:
    """The selected kinds' runners, started, stopped and drained together."""

    def __init__(self, runners: dict[str, Runner]) -> None:
        self.by_kind = runners

    def start(self) -> None:
        for runner in self.by_kind.values():
            runner.start()

    def begin_stop(self) -> None:
        for runner in self.by_kind.values():
            runner.begin_stop()

    def stop(self, grace: float | None = None) -> None:
        """Each runner's grace period at the same time (not one after the other: the platform's SIGKILL comes 30 s
        after its SIGTERM whatever we run)."""
        self.begin_stop()
        stopping = [threading.Thread(target=r.stop, args=(grace,), daemon=True) for r in self.by_kind.values()]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()

    def stop_now(self) -> None:
        for runner in self.by_kind.values():
            runner.stop_now()

    def drain(self) -> int:
        """Each kind in turn, then the queues again for what the tasks enqueued (a reminder's text, a notice)."""
        ran = sum(runner.drain() for runner in self.by_kind.values())
        return ran + sum(runner.drain() for kind, runner in self.by_kind.items() if kind in QUEUES)


def build(kinds: list[str], concurrency: dict[str, int | None] | None = None, **task_options: Any) -> Runners:
    """The runners of these kinds that have something to run here: a queue's (when its app registered one that is
    configured), the task loop (when tasks are kept in the database), the housekeeping (unless HOUSEKEEPING_SECONDS
    is 0)."""
    concurrency = concurrency or {}
    built = {kind: _builders[kind](concurrency.get(kind)) for kind in QUEUES if kind in _builders}
    if queued_in_database():
        built["tasks"] = TaskLoop(backend_name=deliver_message.get_backend().alias, **task_options)
    if Housekeeper.enabled():
        built["housekeeping"] = Housekeeper()
    return Runners({kind: r for kind, r in built.items() if kind in kinds and r is not None})
