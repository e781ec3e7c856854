"""ingestion.hotpath.memo: what the key and channel-address lookups remember, its size and lifetime."""

from ingestion.hotpath.memo import Memo


def test_the_least_recently_used_entry_goes_first_and_a_renewed_one_is_the_newest():
    memo: Memo[str, int] = Memo()
    memo.remember("a", 1, seconds=60, size=2)
    memo.remember("b", 2, seconds=60, size=2)
    memo.remember("a", 3, seconds=60, size=2)  # renewed: "b" is now the oldest
    memo.remember("c", 4, seconds=60, size=2)
    assert (memo.recall("a"), memo.recall("b"), memo.recall("c")) == (3, None, 4)


class Clock:
    """time.monotonic() as the memo's TTLCache reads it (its timer), moved by the test: with the real clock an entry
    of 50 ms could expire before the very next line ran on a loaded machine."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_an_entry_expires_and_zero_remembers_nothing():
    clock = Clock()
    memo: Memo[str, int] = Memo(timer=clock.monotonic)
    memo.remember("soon", 1, seconds=60, size=10)
    memo.remember("off", 2, seconds=0, size=10)
    memo.remember("none", 3, seconds=60, size=0)
    clock.now += 59.9
    assert memo.recall("soon") == 1
    clock.now += 0.1
    assert (memo.recall("soon"), memo.recall("off"), memo.recall("none")) == (None, None, None)


def test_forget_and_forget_all():
    memo: Memo[str, int] = Memo()
    for name in "abc":
        memo.remember(name, 1, seconds=60, size=10)
    memo.forget("a")
    assert (memo.recall("a"), memo.recall("b")) == (None, 1)
    memo.forget_all()
    assert memo.recall("c") is None


def test_an_entry_recalled_lately_outlives_an_older_unused_one():
    memo: Memo[str, int] = Memo()
    memo.remember("a", 1, seconds=60, size=2)
    memo.remember("b", 2, seconds=60, size=2)
    assert memo.recall("a") == 1  # "b" is now the least recently used
    memo.remember("c", 3, seconds=60, size=2)
    assert (memo.recall("a"), memo.recall("b"), memo.recall("c")) == (1, None, 3)


def test_a_changed_size_or_lifetime_applies_at_the_next_remember():
    now = [1000.0]
    memo: Memo[str, int] = Memo(timer=lambda: now[0])
    memo.remember("a", 1, seconds=60, size=10)
    memo.remember("b", 2, seconds=5, size=1)  # made afresh with the new figures: "a" is gone
    assert (memo.recall("a"), memo.recall("b")) == (None, 2)
    now[0] += 5
    assert memo.recall("b") is None
