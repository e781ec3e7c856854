from typing import Any

from django.core.management.base import BaseCommand

from assistant.approval.requests import expire_overdue


class Command(BaseCommand):
    help = (
        "Expire every action still awaiting the person's approval past APPROVAL_TIMEOUT_SECONDS: it is not done, and "
        "the assistant says so in the thread. Run it from cron every few minutes; an answer given late is refused "
        "anyway."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Expired {expire_overdue()} approval request(s).")
