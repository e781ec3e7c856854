from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from conversations.models import Delivery, DeliveryStatus
from delivery.lifecycle import due as due_deliveries
from delivery.tasks import retry_delivery


class Command(BaseCommand):
    help = (
        "Give deliveries a fresh round of attempts: failed ones (--failed), ones whose attempt is overdue (--due: "
        "a retry the immediate task backend could not defer, a lost task, a dead worker), or chosen ones (--id)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--failed", action="store_true", help="every failed delivery")
        parser.add_argument("--due", action="store_true", help="queued deliveries whose attempt is overdue")
        parser.add_argument(
            "--grace", type=int, default=60, help="with --due: seconds overdue before a delivery counts (60)"
        )
        parser.add_argument(
            "--id",
            action="append",
            default=[],
            dest="ids",
            metavar="ID",
            help="a message id (msg_...) or a delivery number; repeat for several",
        )

    def handle(self, *args: Any, failed: bool, due: bool, grace: int, ids: list[str], **options: Any) -> None:
        if not (failed or due or ids):
            raise CommandError("Say which deliveries to retry: --failed, --due, or --id ID (repeatable).")
        chosen = Q(pk__in=[])
        if failed:
            chosen |= Q(status=DeliveryStatus.FAILED)
        if due:
            chosen |= Q(pk__in=due_deliveries(timedelta(seconds=grace)).values("pk"))
        if ids:
            chosen |= self._by_ids(ids)
        deliveries = list(Delivery.objects.filter(chosen).select_related("message").order_by("created_at"))
        if not deliveries:
            self.stdout.write("No deliveries to retry.")
            return
        retried = 0
        for delivery in deliveries:
            before = f"{delivery.status}, {delivery.attempts} attempt(s)"
            if not retry_delivery(delivery):
                self.stdout.write(f"Skipped {self._name(delivery)}: {delivery.status}.")
                continue
            retried += 1
            delivery.refresh_from_db(fields=["status", "attempts"])
            # With the immediate task backend the attempt has already run; with a queue it waits for a worker.
            self.stdout.write(f"Retried {self._name(delivery)} (was {before}): now {delivery.status}.")
        self.stdout.write(f"Retried {retried} of {len(deliveries)} deliveries.")

    def _by_ids(self, ids: list[str]) -> Q:
        numbers = [int(value) for value in ids if value.isdigit()]
        public_ids = [value for value in ids if value.startswith("msg_")]
        unknown = [value for value in ids if not value.isdigit() and not value.startswith("msg_")]
        if unknown:
            raise CommandError(f"Not a message id (msg_...) or a delivery number: {', '.join(unknown)}")
        found = Q(pk__in=numbers) | Q(message__public_id__in=public_ids)
        missing = set(ids) - {
            value
            for pk, public_id in Delivery.objects.filter(found).values_list("pk", "message__public_id")
            for value in (str(pk), public_id)
        }
        if missing:
            raise CommandError(f"No delivery for: {', '.join(sorted(missing))}")
        return found

    @staticmethod
    def _name(delivery: Delivery) -> str:
        return f"delivery {delivery.pk} of {delivery.message.public_id}"
