from typing import Any

from django.core.management.base import BaseCommand

from devices.services import prune


class Command(BaseCommand):
    help = "Delete `poke login` requests that expired more than a day ago (the keys they issued stay). Run it daily."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Deleted {prune()} CLI log-in request(s) that expired more than a day ago.")
