from typing import Any

from django.core.management.base import BaseCommand

from connections.oauth.mcp import prune_sign_ins


class Command(BaseCommand):
    help = (
        "Delete OAuth sign-ins that were started but never finished (the person never came back from the server's "
        "sign-in page) once they are too old to be finished. The worker's housekeeping runs it hourly."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Deleted {prune_sign_ins()} unfinished OAuth sign-in(s).")
