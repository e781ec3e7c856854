"""The periodic housekeeping a worker does by itself, so that nothing needs cron: approvals that nobody answered
expire (``expireapprovals``), reminders a lost task left unfired fire (``sendreminders``), and what is kept for a
while is pruned (``prunetriggerdeliveries``, ``pruneidempotencykeys``, ``prunedevicelogins``, ``prunechannels``,
``pruneoauthsignins``), and deletions of a history or an account whose worker was killed mid-run go on
(``resumeerasures``).

Each job is the operator command of that name, run by ``call_command`` (so this module, in the delivery layer,
imports none of the apps above it, and cron and the worker do exactly the same thing). Operators who prefer cron
set HOUSEKEEPING_SECONDS=0 and run the commands themselves.

Coordination: every worker process (``manage.py worker``, ``manage.py serve``) runs a ``Housekeeper`` thread,
and a job runs in one of them at a time, about once per its period across all of them. Before running a job, a
worker claims it with one conditional UPDATE of the job's row (``HousekeepingRun``): it wins only if the job's last
start is a period ago and that run finished (or is older than STALE_SECONDS: a worker killed mid-job). PostgreSQL
re-checks the condition on the row a concurrent winner just updated, so two workers never both win; nothing is
held while the job runs. Each job is safe to run twice anyway (they expire or delete by a condition re-checked in
their own statements), so a clock skew between machines costs at most an extra run.
Honest failure mode: a job that raises is logged and tried again a period later, by whichever worker claims it; so
is one whose statement outlasts JOB_STATEMENT_SECONDS, or whose connection ends midway (the run is marked finished on
a new one).
"""

import io
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.management import call_command
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from delivery.models import HousekeepingRun

logger = logging.getLogger("delivery.housekeeping")

# A claimed run that never finished (its worker was killed mid-job) may be claimed again after this. Every job is
# safe to run twice, so this only has to outlast a healthy run (its statements are cut at JOB_STATEMENT_SECONDS):
# after a kill -9, approvals expire at most this late.
STALE_SECONDS = 600
# A job's statement that runs longer is cancelled (PostgreSQL, unless behind a transaction-pooling PgBouncer: see
# _limit_statements): the job fails and is logged, and the round goes on.
# Without it, one statement waiting on a lock that a forgotten transaction holds would stall this worker's
# housekeeping for good, and every other worker's run of that job for STALE_SECONDS.
JOB_STATEMENT_SECONDS = 300
_TICK_SECONDS = 1.0  # how often the thread looks at its own schedule (no query unless a job is due)


@dataclass(frozen=True)
class Job:
    command: str
    periods: int  # its period, in HOUSEKEEPING_SECONDS


# Approvals and reminders are about time the person sees: every period. The prunes keep tables small: hourly with the
# default period (their commands' help says "daily" for cron; more often costs little, each is one indexed DELETE).
JOBS = (
    Job("expireapprovals", 1),
    Job("sendreminders", 1),
    Job("prunetriggerdeliveries", 60),
    Job("pruneidempotencykeys", 60),
    Job("prunedevicelogins", 60),
    Job("prunechannels", 60),
    Job("pruneoauthsignins", 60),
    Job("prunedeliveries", 60),
    Job("prunetexts", 60),
    Job("pruneaudit", 60),
    Job("resumeerasures", 60),
)


def period_of(job: Job) -> float:
    return float(settings.HOUSEKEEPING_SECONDS) * job.periods


def claim(job: Job, now: datetime | None = None) -> bool:
    """Whether this process may run ``job`` now (and, if so, it is marked started): one statement, or two the first
    time a job runs anywhere."""
    now = now or timezone.now()
    due = Q(started_at__lte=now - timedelta(seconds=period_of(job)))
    settled = Q(finished_at__gte=F("started_at")) | Q(started_at__lte=now - timedelta(seconds=STALE_SECONDS))
    if HousekeepingRun.objects.filter(due & settled, job=job.command).update(started_at=now, finished_at=None):
        return True
    try:
        with transaction.atomic():
            HousekeepingRun.objects.create(job=job.command, started_at=now)
    except IntegrityError:
        return False  # the job has a row: not due, or another worker has it
    return True


def run(job: Job) -> str:
    """Run the job's command; returns what it printed. Marks the run finished even when it fails (it is logged)."""
    output = io.StringIO()
    try:
        _limit_statements(JOB_STATEMENT_SECONDS)
        call_command(job.command, stdout=output)
    except Exception:
        logger.exception("housekeeping: %s failed", job.command)
    finally:
        # The job may have failed because its connection did (a restart, a failover): mark the run finished on a new
        # one, or no worker could claim the job again for STALE_SECONDS (STALE_SECONDS of approvals that never expire).
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        _limit_statements(None)
        HousekeepingRun.objects.filter(job=job.command).update(finished_at=timezone.now())
    said = output.getvalue().strip()
    logger.info("housekeeping: %s: %s", job.command, said)
    return said


def _limit_statements(seconds: float | None) -> None:
    """On PostgreSQL, cancel any statement of this connection's session that runs longer than ``seconds``; None: back
    to the session's default (the role's or database's own statement_timeout, if the operator set one).

    Not behind a transaction-pooling PgBouncer (DATABASE_PREPARED_STATEMENTS off, so no server-side binding): there a
    session's setting would stay on a server connection that other clients then use."""
    if connection.vendor != "postgresql" or not connection.settings_dict["OPTIONS"].get("server_side_binding"):
        return
    with connection.cursor() as cursor:
        if seconds is None:
            cursor.execute("RESET statement_timeout")
        else:  # set_config, since SET takes no parameters
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(int(seconds * 1000))])


def run_due(now: datetime | None = None, jobs: tuple[Job, ...] = JOBS) -> list[str]:
    """Claim and run every job that is due; returns the commands this process ran."""
    ran = []
    for job in jobs:
        if claim(job, now):
            run(job)
            ran.append(job.command)
    return ran


class Housekeeper:
    """The thread a worker runs the jobs on. Each job is tried when this process's own schedule says it is due (so
    an idle period costs no query), and runs only if the claim is won."""

    def __init__(self, jobs: tuple[Job, ...] = JOBS) -> None:
        self.jobs = jobs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next: dict[str, float] = {}  # monotonic time each job is next tried here

    @staticmethod
    def enabled() -> bool:
        return settings.HOUSEKEEPING_SECONDS > 0

    def start(self) -> None:
        if not self.enabled():
            return
        self._thread = threading.Thread(target=self._loop, name="housekeeping", daemon=True)
        self._thread.start()

    def begin_stop(self) -> None:
        self._stop.set()

    def stop(self, grace: float | None = None) -> None:
        """Stop after the job in progress, waiting for it at most ``grace`` seconds (5 by default): every job is
        safe to cut off and run again."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0 if grace is None else grace)

    def stop_now(self) -> None:
        self._stop.set()

    def drain(self) -> int:
        return 0  # --batch does no housekeeping: the operator commands are there for a one-off run

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # the database is down, say: wait and try again, as the engine does
                logger.exception("housekeeping: a round failed")
            finally:
                close_old_connections()
            self._stop.wait(_TICK_SECONDS)

    def tick(self) -> list[str]:
        """Try the jobs this process's schedule says are due; returns those it ran."""
        ran = []
        for job in self.jobs:
            if self._stop.is_set():
                break
            if time.monotonic() < self._next.get(job.command, 0.0):
                continue
            self._next[job.command] = time.monotonic() + period_of(job)
            if claim(job):
                run(job)
                ran.append(job.command)
        return ran
