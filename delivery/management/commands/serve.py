"""``make run``: Django's development server with the worker inside the same process, so that a newcomer sees the
production path (the database queue, reminders firing at their time) without a second terminal.

``manage.py serve [addr:port]`` is ``runserver`` (with WhiteNoise's static files, its autoreload) plus, in the process
that serves, the same work as ``manage.py worker`` (delivery/work.py) on threads of their own: the delivery engine and
django-tasks-db's task loop when TASK_BACKEND is the database (the default), the channel sender when a channel is
configured (so a linked phone or Telegram chat gets its texts), and the periodic housekeeping. Under DEBUG without
PUBLIC_BASE_URL it also tells tools to post their follow-ups to the address it listens on (ops/public_url.py).
Not for production: the Procfile runs gunicorn and ``manage.py worker`` as separate processes."""

import os
from typing import Any

from django.core.management import get_commands, load_command_class
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV

from delivery import work
from ops import public_url
from ops.preload import import_before_threads

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
        runners = work.build(list(work.KINDS))
        runners.start()
        self.stdout.write(f"Worker running in this process: {', '.join(runners.by_kind)}.")
        try:
            super().inner_run(*args, **options)
        finally:
            runners.stop(grace=2)
