"""What a process remembers for a while: at most ``size`` entries, each for ``seconds``, the oldest going first.

Both remembered lookups of the hot path use it: API keys by digest (ingestion/hotpath/recent.py) and linked channel
addresses (channels/senders.py). Each reads its size and lifetime from settings at every ``remember``, so a test's
settings override applies at once; 0 for either switches remembering off. Shared by a process's threads."""

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Entry[V]:
    value: V
    expires: float  # time.monotonic()


class Memo[K: Hashable, V]:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[K, _Entry[V]] = {}  # insertion order is age order: the first entry is the oldest

    def recall(self, key: K) -> V | None:
        """The value remembered for ``key`` while it has not expired, else None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= time.monotonic():
            self.forget(key)
            return None
        return entry.value

    def remember(self, key: K, value: V, seconds: float, size: int) -> None:
        if seconds <= 0 or size <= 0:
            return
        entry = _Entry(value, time.monotonic() + seconds)
        with self._lock:
            self._entries.pop(key, None)  # a renewed entry is the newest
            while len(self._entries) >= size:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = entry

    def forget(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def forget_all(self) -> None:
        with self._lock:
            self._entries.clear()
