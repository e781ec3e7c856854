from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from console.erasure import erase


class Command(BaseCommand):
    help = (
        "Start again the runs of a history's or account's deletion whose worker was killed mid-run (their task row "
        "stays RUNNING): each is marked failed and a new run enqueued, which goes on from what is left. Hourly."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        # A run lasts at most twice PRUNE_RUN_SECONDS (an account's last: messages, then audit log).
        started_before = timezone.now() - timedelta(seconds=3 * settings.PRUNE_RUN_SECONDS + 60)
        lost = DBTaskResult.objects.filter(
            task_path=erase.module_path, status=TaskResultStatus.RUNNING, started_at__lt=started_before
        )
        resumed = 0
        for row in lost:
            with transaction.atomic():
                if lost.filter(pk=row.pk).update(status=TaskResultStatus.FAILED, finished_at=timezone.now()):
                    erase.enqueue(*row.args_kwargs["args"], **row.args_kwargs["kwargs"])
                    resumed += 1
        self.stdout.write(f"Started again {resumed} deletion(s) whose worker stopped mid-run.")
