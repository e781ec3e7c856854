from django.db import models


class HousekeepingRun(models.Model):
    """When a periodic housekeeping job (delivery/housekeeping.py) last started and finished, in any worker: the row
    a worker must win (one conditional UPDATE) before it runs the job."""

    job = models.CharField(max_length=64, primary_key=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "housekeeping run"

    def __str__(self) -> str:
        return f"{self.job} (started {self.started_at:%Y-%m-%d %H:%M:%S})"
