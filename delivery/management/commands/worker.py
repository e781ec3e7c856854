"""The Procfile's ``worker``: every kind of background work in one process (delivery/work.py): the deliveries to the
assistant, the channel sends (the outbox), the tasks kept in the database (reminders among them) and the periodic
housekeeping, each with its own concurrency setting (DELIVERY_CONCURRENCY, CHANNEL_CONCURRENCY; the task loop runs
one task at a time; HOUSEKEEPING_SECONDS).

``--only channels`` (a comma-separated list of ``deliveries``, ``channels``, ``tasks``, ``housekeeping``) runs a
selection, for operators who want one kind on machines of its own (docs/howto/scaling.md). Without it, all of them.

SIGTERM (or Ctrl+C): every kind stops taking work at once; the task in progress finishes, the attempts and sends in
flight get their grace period (DELIVERY_GRACE_SECONDS, CHANNEL_GRACE_SECONDS, running together), and what could not
finish is put back in its queue uncounted. A second SIGTERM puts them back at once and exits. ``--batch`` (tests,
one-off runs) delivers, sends and runs everything that is due, then exits; it does no housekeeping.

The housekeeping is coordinated with every other worker (one run of each job at a time across them), unless
HOUSEKEEPING_SECONDS is 0.
"""

import logging
import os
import signal
import sys
import threading
import time
from argparse import ArgumentParser, ArgumentTypeError
from types import FrameType
from typing import Any, ClassVar

from django.core.management.base import CommandError
from django.db import DatabaseError, connection
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV
from django_tasks_db.management.commands import db_worker

from delivery import work
from delivery.housekeeping import Housekeeper
from delivery.work import Runner
from ops.argparse_internals import take_as_given
from ops.preload import import_before_threads

logger = logging.getLogger("delivery.handoff")


class Runners:
    """The selected queues' runners, started, stopped and drained together."""

    def __init__(self, runners: list[Runner]) -> None:
        self.all = runners

    def start(self) -> None:
        for runner in self.all:
            runner.start()

    def begin_stop(self) -> None:
        for runner in self.all:
            runner.begin_stop()

    def stop(self, grace: float | None = None) -> None:
        """Each runner's grace period at the same time (not one after the other: the platform's SIGKILL comes 30 s
        after its SIGTERM whatever we run)."""
        self.begin_stop()
        stopping = [threading.Thread(target=runner.stop, args=(grace,), daemon=True) for runner in self.all]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()

    def stop_now(self) -> None:
        for runner in self.all:
            runner.stop_now()

    def drain(self) -> int:
        return sum(runner.drain() for runner in self.all)


# How long the task loop waits, when no task is due, before it looks again. The answers to a phone's approval
# ("Approved: ...") and a channel's other notices are tasks, so a person who answered waits up to this long for the
# confirmation: django-tasks-db's 1 s made it 0.9 to 1.1 s (bench/approval_latency.py). A look when idle is one
# indexed query.
TASK_POLL_SECONDS = 0.2


class _TaskLoop(db_worker.Worker):
    runners: Runners | None = None
    early_signals: ClassVar[list[int]] = []  # set up by Command for the one task loop it builds

    def run(self) -> None:
        """django-tasks-db's loop, which a database error would end (and with it the process and the attempts in
        flight): a lost connection or an outage is waited out instead, as the queues' claimers do."""
        failures = 0
        while self.running:
            try:
                super().run()
                return
            except DatabaseError as error:
                failures += 1
                logger.warning("task loop: the database failed (%s); trying again", type(error).__name__)
                connection.close()
                time.sleep(min(0.5 * 2**failures, 5.0))

    def configure_signals(self) -> None:
        """The task loop's handlers; a signal that came before them, while the queues were already attempting, is
        acted on now (the default action would have ended the process and its attempts with no grace period)."""
        super().configure_signals()
        early, _TaskLoop.early_signals = _TaskLoop.early_signals, []
        for signum in early:
            self.shutdown(signum, None)

    def shutdown(self, signum: int, frame: FrameType | None) -> None:
        if self.runners is not None:
            if not self.running:  # the second signal: no more grace
                self.reset_signals()
                self.runners.stop_now()
                sys.exit(1)
            self.runners.begin_stop()
        super().shutdown(signum, frame)


def _database_backend(name: str) -> bool:
    try:
        db_worker.valid_backend_name(name)
    except ArgumentTypeError:
        return False
    return True


class Command(db_worker.Command):
    help = (
        "Run the background worker: deliveries to the assistant, channel sends, tasks (reminders) and housekeeping; "
        "--only picks some of them."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        # django-tasks-db refuses, while parsing, a task backend outside the database; here that only means there is
        # no task loop to run (the other kinds still run: channel sends under TASK_BACKEND=immediate, say).
        take_as_given(parser, "backend_name")
        parser.set_defaults(interval=TASK_POLL_SECONDS)
        parser.add_argument(
            "--only",
            default="",
            metavar="KINDS",
            help=f"Run only these kinds of work, comma-separated, of: {', '.join(work.KINDS)} (default: all).",
        )
        parser.add_argument(
            "--concurrency", type=int, default=None, help="Deliveries in flight (default: DELIVERY_CONCURRENCY)."
        )
        parser.add_argument(
            "--channel-concurrency", type=int, default=None, help="Sends in flight (default: CHANNEL_CONCURRENCY)."
        )

    def handle(  # type: ignore[override]
        self, *, only: str, concurrency: int | None, channel_concurrency: int | None, **options: Any
    ) -> None:
        try:
            kinds = work.selection(only)
        except ValueError as error:
            raise CommandError(str(error)) from error
        import_before_threads()
        housekeeper = Housekeeper()
        # Under autoreload the command runs twice, in the watching process and in the one that works: only there.
        working_here = not options["reload"] or os.environ.get(DJANGO_AUTORELOAD_ENV) == "true"
        if "housekeeping" in kinds and not options["batch"] and working_here:
            housekeeper.start()
        try:
            self._work(kinds, {"deliveries": concurrency, "channels": channel_concurrency}, **options)
        finally:
            housekeeper.stop()

    def _work(self, kinds: list[str], concurrency: dict[str, int | None], **options: Any) -> None:
        built = [work.runner(kind, concurrency[kind]) for kind in ("deliveries", "channels") if kind in kinds]
        runners = Runners([runner for runner in built if runner is not None])
        tasks = "tasks" in kinds and _database_backend(options["backend_name"])
        if options["batch"]:
            self.configure_logging(options["verbosity"])
            runners.drain()
            if tasks:
                options["reload"] = False
                super().handle(**options)
                runners.drain()
            return
        if not runners.all and tasks:
            super().handle(**options)  # the task loop alone, as django-tasks-db runs it (with its autoreload)
            return
        if not tasks:
            self._wait_for_signal(runners)
            return
        options["reload"] = False  # a reloader's outer process would run the queues a second time
        original = db_worker.Worker
        _TaskLoop.runners = runners
        _TaskLoop.early_signals = []
        db_worker.Worker = _TaskLoop  # type: ignore[misc]  # the parent builds its worker by this name
        # The queues claim at once, before the parent has built its task loop and set its handlers: a SIGTERM
        # meanwhile is kept for them (_TaskLoop.configure_signals) rather than killing the process mid-attempt.
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda signum, frame: _TaskLoop.early_signals.append(signum))
        runners.start()
        try:
            super().handle(**options)
        except SystemExit:
            pass
        finally:
            db_worker.Worker = original  # type: ignore[misc]
        try:
            runners.stop()
        except SystemExit:
            runners.stop_now()
            raise
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def _wait_for_signal(self, runners: Runners) -> None:
        """Without the task loop: start the queues, wait for SIGTERM (or Ctrl+C), then stop them; a second signal
        ends their grace period at once. The handlers are set before the queues start claiming."""
        stopping = threading.Event()
        hurried = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if stopping.is_set():
                hurried.set()
                runners.stop_now()
                return
            stopping.set()
            runners.begin_stop()

        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, on_signal)
        if not runners.all:
            self.stderr.write("Nothing to run here (no channel configured, or deliveries go through another backend).")
        runners.start()
        while not stopping.wait(0.5):
            pass
        if not hurried.is_set():
            runners.stop()
        self.stdout.write("Worker stopped.")
