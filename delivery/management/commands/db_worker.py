"""The Procfile's worker: django-tasks-db's ``db_worker``, running ordinary django.tasks tasks (reminders and the
like) in its main thread as before, with the delivery engine (delivery/engine.py) beside it in the same process.

SIGTERM (or Ctrl+C): both stop taking work; the task in progress finishes, the attempts in flight get
DELIVERY_GRACE_SECONDS, and those that could not finish are put back in the queue uncounted. A second SIGTERM puts
them back at once and exits. ``--batch`` (tests, one-off runs) delivers everything that is due, runs the ready tasks
and exits. ``--no-deliveries`` runs the tasks only.

Beside them runs the periodic housekeeping (delivery/housekeeping.py: approvals expire, prunes), coordinated with
every other worker, unless HOUSEKEEPING_SECONDS is 0; a ``--batch`` run does none of it.
"""

import logging
import os
import signal
import sys
import time
from argparse import ArgumentParser, BooleanOptionalAction
from types import FrameType
from typing import Any, ClassVar

from django.db import DatabaseError, connection
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV
from django_tasks_db.management.commands import db_worker

from delivery.engine import Engine
from delivery.housekeeping import Housekeeper
from delivery.tasks import queued_in_database

logger = logging.getLogger("delivery.handoff")


class _Worker(db_worker.Worker):
    engine: Engine | None = None
    early_signals: ClassVar[list[int]] = []  # set up by Command._work for the one worker it builds

    def run(self) -> None:
        """django-tasks-db's loop, which a database error would end (and with it the process and the delivery
        engine's attempts in flight): a lost connection or an outage is waited out instead, as the engine does."""
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
        """The task loop's handlers; a signal that came before them, while the engine was already attempting, is
        acted on now (the default action would have ended the process and its attempts with no grace period)."""
        super().configure_signals()
        early, _Worker.early_signals = _Worker.early_signals, []
        for signum in early:
            self.shutdown(signum, None)

    def shutdown(self, signum: int, frame: FrameType | None) -> None:
        if self.engine is not None:
            if not self.running:  # the second signal: no more grace
                self.reset_signals()
                self.engine.stop_now()
                sys.exit(1)
            self.engine.begin_stop()
        super().shutdown(signum, frame)


class Command(db_worker.Command):
    help = "Run the background worker: ordinary django.tasks tasks from the database, and the delivery engine."

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--deliveries",
            action=BooleanOptionalAction,
            default=True,
            help="Run the delivery engine in this process too (default: yes).",
        )
        parser.add_argument(
            "--concurrency", type=int, default=None, help="Deliveries in flight (default: DELIVERY_CONCURRENCY)."
        )

    def handle(self, *, deliveries: bool, concurrency: int | None, **options: Any) -> None:  # type: ignore[override]
        housekeeper = Housekeeper()
        # Under autoreload the command runs twice, in the watching process and in the one that works: only there.
        if not options["batch"] and (not options["reload"] or os.environ.get(DJANGO_AUTORELOAD_ENV) == "true"):
            housekeeper.start()
        try:
            self._work(deliveries, concurrency, **options)
        finally:
            housekeeper.stop()

    def _work(self, deliveries: bool, concurrency: int | None, **options: Any) -> None:
        if not (deliveries and queued_in_database()):
            super().handle(**options)
            return
        engine = Engine(concurrency=concurrency)
        options["reload"] = False  # a reloader's outer process would run a second engine
        if options["batch"]:
            self.configure_logging(options["verbosity"])
            engine.drain()
            super().handle(**options)
            engine.drain()
            return
        original = db_worker.Worker
        _Worker.engine = engine
        _Worker.early_signals = []
        db_worker.Worker = _Worker  # type: ignore[misc]  # the parent builds its worker by this name
        # The engine claims at once, before the parent has built its worker and set its handlers: a SIGTERM meanwhile
        # is kept for them (_Worker.configure_signals) rather than killing the process mid-attempt.
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda signum, frame: _Worker.early_signals.append(signum))
        engine.start()
        try:
            super().handle(**options)
        except SystemExit:
            pass
        finally:
            db_worker.Worker = original  # type: ignore[misc]
        try:
            engine.stop()
        except SystemExit:
            engine.stop_now()
            raise
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
