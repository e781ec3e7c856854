from typing import Any

from django.core.management.base import BaseCommand

from reminders.firing import fire_due


class Command(BaseCommand):
    help = (
        "Fire every reminder whose time has come. Needed only with a task backend that cannot run a task later "
        "(TASK_BACKEND=immediate): run it from cron every minute. The database backend's worker fires them itself."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Fired {fire_due()} reminder(s).")
