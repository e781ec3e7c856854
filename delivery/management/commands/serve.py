"""``make run``: Django's development server with the worker inside the same process, so that a newcomer sees the
production path (the database queue, reminders firing at their time) without a second terminal.

``manage.py serve [addr:port]`` is ``runserver`` (with WhiteNoise's static files, its autoreload) plus, in the process
that serves, the same work as ``manage.py worker`` (delivery/work.py) on threads of their own: the delivery engine and
django-tasks-db's task loop when TASK_BACKEND is the database (the default), the channel sender when a channel is
configured (so a linked phone or Telegram chat gets its texts), and the periodic housekeeping. Under DEBUG without
PUBLIC_BASE_URL it also tells tools to post their follow-ups to the address it listens on (ops/public_url.py).
Not for production: the Procfile runs gunicorn and ``manage.py worker`` as separate processes."""

import logging
import os
import threading
from typing import Any

from django.core.management import get_commands, load_command_class
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV
from django_tasks_db.management.commands.db_worker import Worker

from delivery import work
from delivery.housekeeping import Housekeeper
from delivery.management.commands.worker import TASK_POLL_SECONDS, Runners
from delivery.tasks import deliver_message, queued_in_database
from ops import public_url
from ops.preload import import_before_threads

logger = logging.getLogger("delivery.handoff")

# The runserver command this project uses (WhiteNoise's, which extends staticfiles', which extends Django's).
RunServer: Any = type(load_command_class(get_commands()["runserver"], "runserver"))


class Command(RunServer):
    help = "Development server with the worker (deliveries, channel sends, tasks, housekeeping) inside (make run)."

    def run(self, **options: Any) -> None:
        # In the process that serves, before the autoreloader's thread starts (it imports the URLconf while
        # inner_run's thread imports the same packages: ops/preload.py). Not in the reloader's outer process, which
        # only watches files.
        if not options["use_reloader"] or os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
            try:
                import_before_threads()
            except Exception:
                # A mistake in the code being edited: runserver's own import reports it, and its reloader waits for
                # the fix, as without this.
                if not options["use_reloader"]:
                    raise
        super().run(**options)

    def inner_run(self, *args: Any, **options: Any) -> None:
        # Runs once in the process that serves (under autoreload, the child): start the worker's threads here.
        host = f"[{self.addr}]" if self._raw_ipv6 else self.addr
        public_url.remember(f"{self.protocol}://{host}:{self.port}")
        tasks = None
        housekeeper = Housekeeper()  # approvals expire, prunes (delivery/housekeeping.py), as the worker does
        housekeeper.start()
        built = [work.runner(kind) for kind in ("deliveries", "channels")]
        runners = Runners([runner for runner in built if runner is not None])
        runners.start()
        if queued_in_database():
            tasks = Worker(
                queue_names=["default"],
                interval=TASK_POLL_SECONDS,
                batch=False,
                backend_name=deliver_message.get_backend().alias,
                startup_delay=False,
                max_tasks=None,
                worker_id="serve",
                excluded_queue_names=[],
            )
            threading.Thread(target=tasks.run, name="task-loop", daemon=True).start()
        running = [kind for kind, runner in zip(("deliveries", "channels"), built, strict=True) if runner is not None]
        running += ["tasks"] if tasks is not None else []
        self.stdout.write(f"Worker running in this process: {', '.join([*running, 'housekeeping'])}.")
        try:
            super().inner_run(*args, **options)
        finally:
            housekeeper.stop(timeout=2)
            if tasks is not None:
                tasks.running = False
            runners.stop(grace=2)
