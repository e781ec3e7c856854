"""The kinds of background work one worker process runs (``manage.py worker``, ``manage.py serve``), each with its
own concurrency setting:

- ``deliveries``: messages handed to the assistant (delivery/engine.py; DELIVERY_CONCURRENCY attempts in flight);
- ``channels``: the outbox sent to people's phones (channels/outbound/sender.py; CHANNEL_CONCURRENCY sends);
- ``tasks``: ordinary django.tasks tasks kept in the database, reminders among them (django-tasks-db's loop, one
  task at a time);
- ``housekeeping``: approvals that expire, reminders a lost task left unfired, prunes (delivery/housekeeping.py,
  every HOUSEKEEPING_SECONDS).

The first two are queues with many attempts in flight: each is a ``Runner``, built by the app that owns it and
registered here (channels sits above delivery in the layers, so it registers its sender from its AppConfig). The
worker starts every selected runner, stops them together on SIGTERM (each with its own grace period, running at the
same time) and, for ``--batch``, drains them."""

from collections.abc import Callable
from typing import Protocol

KINDS = ("deliveries", "channels", "tasks", "housekeeping")


class Runner(Protocol):
    """A queue worked by threads of this process."""

    def start(self) -> None:
        """Claim and attempt until stopped."""

    def begin_stop(self) -> None:
        """Claim nothing more and start nothing claimed ahead; what is in flight goes on, its leases renewed."""

    def stop(self, grace: float | None = None) -> None:
        """``begin_stop``, wait for what is in flight until the grace period ends, put back the rest uncounted."""

    def stop_now(self) -> None:
        """Put back what is in flight at once (a second SIGTERM)."""

    def drain(self) -> int:
        """Without threads: attempt everything claimable now, then return how many ran (``--batch``)."""


# kind -> build(concurrency or None for its setting) -> a runner, or None when there is nothing to run (no channel
# configured, deliveries handed off by another backend).
_builders: dict[str, Callable[[int | None], Runner | None]] = {}


def register(kind: str, build: Callable[[int | None], Runner | None]) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r}; one of {', '.join(KINDS)}")
    _builders[kind] = build


def runner(kind: str, concurrency: int | None = None) -> Runner | None:
    build = _builders.get(kind)
    return None if build is None else build(concurrency)


def selection(only: str) -> list[str]:
    """``--only deliveries,channels`` as a list of kinds, in KINDS' order; every kind when empty."""
    if not only.strip():
        return list(KINDS)
    chosen = {part.strip() for part in only.split(",") if part.strip()}
    unknown = chosen - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kind(s) of work: {', '.join(sorted(unknown))}; choose among {', '.join(KINDS)}")
    return [kind for kind in KINDS if kind in chosen]
