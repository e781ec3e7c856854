"""The claimer of a worker process that works a queue kept in a table (delivery/leases.py) with many attempts in
flight: the delivery engine (delivery/engine.py) and the channel worker (channels/outbound/sender.py) each run one.

One thread, one database connection. Whenever the process has room (``capacity`` minus what it holds), it claims up
to ``batch`` rows with ``claim(wanted)`` and gives them to ``hand_over`` (which starts their attempts on threads of
the caller's); it holds each claimed row until the caller's recorder has written its outcome (``ours`` then
``release``), and renews the leases of everything it holds every third of a lease, from the first claim until the
process has finished stopping, grace period included: a stopping process keeps its rows as long as it lives, so no
other worker takes one over and runs it a second time while its attempt finishes.

After a claim that found less than there was room for, it sleeps until an outcome is released (``release`` wakes it)
or ``poll_seconds`` pass; woken, it waits ``gather_seconds`` more so that one claim serves several freed slots. A
failed claim (the database restarting, say) is tried again after a backoff that doubles up to 5 s.

Stopping: ``begin_stop`` (claim nothing more, keep renewing), then ``stop`` once the grace period is over, which ends
the thread and returns what was still held (for the caller to put back)."""

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from django.db import connection

from delivery.leases import Renewals


class Claimer[C]:
    def __init__(
        self,
        *,
        name: str,
        capacity: int,
        batch: int,
        claim: Callable[[int], Sequence[C]],
        key: Callable[[C], tuple[int, int]],
        hand_over: Callable[[Sequence[C]], None],
        renewals: Renewals,
        logger: logging.Logger,
        poll_seconds: float = 0.1,
        gather_seconds: float = 0.01,
    ) -> None:
        """``key(claim)``: the row's id and the claim's attempt number (its token, delivery/leases.py)."""
        self.name = name
        self.capacity = capacity
        self.batch = batch
        self.renewals = renewals
        self._claim = claim
        self._key = key
        self._hand_over = hand_over
        self._logger = logger
        self._poll_seconds = poll_seconds
        self._gather_seconds = gather_seconds
        self._held: dict[int, C] = {}  # by row id: claimed, outcome not yet recorded
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._held)

    def ours(self, claims: Iterable[C]) -> list[C]:
        """Of these finished claims, those this process still holds (not put back at a stop meanwhile), whose
        outcome the caller may now write; their leases are no longer renewed (a renewal after the outcome would
        find the row gone and call it lost)."""
        with self._lock:
            held = [claim for claim in claims if self._held.get(self._key(claim)[0]) is claim]
        for claim in held:
            self.renewals.discard(*self._key(claim))
        return held

    def release(self, claims: Iterable[C]) -> None:
        """Their outcomes are written: forget them (room for more) and wake the claimer."""
        with self._lock:
            for claim in claims:
                row_id, attempt = self._key(claim)
                self.renewals.discard(row_id, attempt)
                if self._held.get(row_id) is claim:
                    del self._held[row_id]
        self._wake.set()

    def begin_stop(self) -> None:
        """Claim nothing more; what is held keeps its leases."""
        self._stopping.set()
        self._wake.set()

    def stop(self) -> list[C]:
        """End the thread; what was still held, now no longer this process's (late outcomes of it are not ours)."""
        self._stopping.set()
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            unfinished = list(self._held.values())
            self._held.clear()
        return unfinished

    def _loop(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            self.renewals.tick(time.monotonic())
            if self._stopping.is_set():  # the grace period: claim nothing, keep the leases
                self._sleep(self._poll_seconds)
                continue
            wanted = min(self.capacity - self.in_flight(), self.batch)
            if wanted <= 0:
                if self._sleep(self._poll_seconds):
                    time.sleep(self._gather_seconds)
                continue
            try:
                claims = self._claim(wanted)
                failures = 0
            except Exception as error:
                failures += 1
                self._logger.warning("%s: claiming failed (%s); trying again", self.name, type(error).__name__)
                connection.close()  # a fresh connection next time (the database may have restarted)
                self._sleep(min(self._poll_seconds * 2**failures, 5.0))
                continue
            with self._lock:
                for claim in claims:
                    row_id, attempt = self._key(claim)
                    self._held[row_id] = claim
                    self.renewals.add(row_id, attempt)
            if claims:
                self._hand_over(claims)
            # Fewer than there was room for: nothing more is ready right now.
            if len(claims) < wanted and self._sleep(self._poll_seconds):
                time.sleep(self._gather_seconds)
        connection.close()

    def _sleep(self, seconds: float) -> bool:
        """Wait until woken or ``seconds`` pass; whether woken."""
        woken = self._wake.wait(seconds)
        self._wake.clear()
        return woken
