"""The Procfile's ``worker``: every kind of background work in one process (delivery/work.py): the deliveries to the
assistant, the channel sends (the outbox), the tasks kept in the database (reminders among them) and the periodic
housekeeping, each with its own concurrency setting (DELIVERY_CONCURRENCY, CHANNEL_CONCURRENCY; the task loop runs
one task at a time; HOUSEKEEPING_SECONDS).

``--only channels`` (a comma-separated list of ``deliveries``, ``channels``, ``tasks``, ``housekeeping``) runs a
selection, for operators who want one kind on machines of its own (docs/howto/scaling.md). Without it, all of them.

SIGTERM (or Ctrl+C): every kind stops taking work at once; the task in progress finishes, the attempts and sends in
flight get their grace period (DELIVERY_GRACE_SECONDS, CHANNEL_GRACE_SECONDS, running together), and what could not
finish is put back in its queue uncounted. A second SIGTERM puts them back at once and exits. The handlers are set
before anything starts, so a SIGTERM that comes while the worker is still starting is acted on the same way.
``--batch`` (tests, one-off runs) delivers, sends and runs everything that is due, then exits; it does no
housekeeping.
"""

import signal
import threading
from argparse import ArgumentParser, BooleanOptionalAction
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from delivery import work
from ops.preload import import_before_threads


class Command(BaseCommand):
    help = (
        "Run the background worker: deliveries to the assistant, channel sends, tasks (reminders) and housekeeping; "
        "--only picks some of them."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
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
        parser.add_argument("--batch", action="store_true", help="Run what is due now, then exit.")
        parser.add_argument("--max-tasks", type=int, default=None, help="With --batch: at most this many tasks.")
        parser.add_argument(
            "--interval",
            type=float,
            default=work.TASK_POLL_SECONDS,
            help="Seconds between looks for a due task when none is (default: %(default)s).",
        )
        # Accepted as django-tasks-db's db_worker accepts them, so that existing Procfiles and scripts keep working.
        parser.add_argument("--reload", action=BooleanOptionalAction, default=False, help="Ignored: never reloads.")
        parser.add_argument("--no-startup-delay", action="store_false", dest="startup_delay", help="No random delay.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            kinds = work.selection(options["only"])
        except ValueError as error:
            raise CommandError(str(error)) from error
        import_before_threads()
        runners = work.build(
            kinds,
            {"deliveries": options["concurrency"], "channels": options["channel_concurrency"]},
            interval=options["interval"],
            max_tasks=options["max_tasks"],
            startup_delay=options["startup_delay"] and not options["batch"],
        )
        if options["batch"]:
            runners.drain()
            return
        self._run_until_signalled(runners)

    def _run_until_signalled(self, runners: work.Runners) -> None:
        """Start the runners, wait for SIGTERM (or Ctrl+C), then stop them; a second signal ends their grace period
        at once. The handlers are set before the runners start."""
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
        if not runners.by_kind:
            self.stderr.write("Nothing to run here (no channel configured, or deliveries go through another backend).")
        runners.start()
        while not stopping.wait(0.5):
            pass
        runners.stop()
        self.stdout.write("Worker stopped.")
