from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from ingestion.idempotency import prune_expired


class Command(BaseCommand):
    help = "Delete Idempotency-Key records older than IDEMPOTENCY_KEY_TTL_SECONDS (24 hours by default). Run it daily."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = prune_expired()
        hours = settings.IDEMPOTENCY_KEY_TTL_SECONDS / 3600
        self.stdout.write(f"Deleted {deleted} Idempotency-Key record(s) older than {hours:g} hours.")
