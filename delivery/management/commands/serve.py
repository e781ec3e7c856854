"""``make run``: Django's development server with the worker inside the same process, so that a newcomer sees the
production path (the database queue, reminders firing at their time) without a second terminal.

``manage.py serve [addr:port]`` is ``runserver`` (with WhiteNoise's static files, its autoreload) plus, in the process
that serves, the delivery engine (delivery/engine.py) and django-tasks-db's task loop on threads of their own, when
TASK_BACKEND is the database (the default), and the periodic housekeeping (delivery/housekeeping.py). Under DEBUG
without PUBLIC_BASE_URL it also tells tools to post their follow-ups to the address it listens on (ops/public_url.py).
Not for production: the Procfile runs gunicorn and ``manage.py db_worker`` as separate processes."""

import logging
import threading
from typing import Any

from django.core.management import get_commands, load_command_class
from django_tasks_db.management.commands.db_worker import Worker

from delivery.engine import Engine
from delivery.housekeeping import Housekeeper
from delivery.tasks import deliver_message, queued_in_database
from ops import public_url

logger = logging.getLogger("delivery.handoff")

# The runserver command this project uses (WhiteNoise's, which extends staticfiles', which extends Django's).
RunServer: Any = type(load_command_class(get_commands()["runserver"], "runserver"))


class Command(RunServer):
    help = "Development server with the delivery engine and the task loop in the same process (make run)."

    def inner_run(self, *args: Any, **options: Any) -> None:
        # Runs once in the process that serves (under autoreload, the child): start the worker's threads here.
        host = f"[{self.addr}]" if self._raw_ipv6 else self.addr
        public_url.remember(f"{self.protocol}://{host}:{self.port}")
        engine = tasks = None
        housekeeper = Housekeeper()  # approvals expire, prunes (delivery/housekeeping.py), as db_worker does
        housekeeper.start()
        if queued_in_database():
            engine = Engine()
            engine.start()
            tasks = Worker(
                queue_names=["default"],
                interval=1,
                batch=False,
                backend_name=deliver_message.get_backend().alias,
                startup_delay=False,
                max_tasks=None,
                worker_id="serve",
                excluded_queue_names=[],
            )
            threading.Thread(target=tasks.run, name="task-loop", daemon=True).start()
            self.stdout.write("Delivery engine and task loop running in this process.")
        try:
            super().inner_run(*args, **options)
        finally:
            housekeeper.stop(timeout=2)
            if tasks is not None:
                tasks.running = False
            if engine is not None:
                engine.stop(grace=2)
