from typing import Any

from django.core.management.base import BaseCommand

from channels import inbound, linking


class Command(BaseCommand):
    help = (
        "Delete what the channels no longer need: link codes expired more than a day ago, provider message ids "
        "older than 30 days (past any provider's retries), and day-old 'how to link' marks. Run it daily."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        codes = linking.prune()
        events, hints = inbound.prune()
        self.stdout.write(
            f"Deleted {codes} expired link code(s), {events} provider message id(s) and {hints} how-to-link mark(s)."
        )
