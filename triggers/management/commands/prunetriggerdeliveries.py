from typing import Any

from django.core.management.base import BaseCommand

from triggers.services import prune_received_deliveries


class Command(BaseCommand):
    help = (
        "Forget the GitHub deliveries webhook triggers received more than TRIGGER_DELIVERY_RETENTION_SECONDS ago "
        "(kept to acknowledge replays without a second message). Run it daily."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Deleted {prune_received_deliveries()} record(s) of received deliveries.")
