"""The suite itself: it touches only the stores it is given (docs/howto/run-the-tests.md), runs in random
order and says with which seed, and a test that leaves the process environment changed is caught at once, whatever
runs after it."""

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import live_stack, suite
from tests.ports import free_port
from tests.test_health import closed_port

ROOT = Path(__file__).resolve().parent.parent


def run_pytest(tmp_path: Path, source: str, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh process on one test file, with this suite's rules (tests/suite.py)."""
    test_file = tmp_path / "test_probe.py"
    test_file.write_text(source)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | env
    environment = {k: v for k, v in environment.items() if v}  # an empty value removes the variable
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
         "-p", "tests.suite", "-p", "no:cacheprovider", *options, str(test_file)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_redis_database_0_is_refused_before_any_test_runs(tmp_path):
    done = run_pytest(tmp_path, "def test_nothing():\n    pass\n", REDIS_URL="redis://127.0.0.1:6379/0")

    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "REDIS_URL names Redis database 0" in done.stderr
    assert "1 passed" not in done.stdout
    # The same without a number: Redis's default is 0 too.
    assert run_pytest(tmp_path, "", REDIS_URL="redis://127.0.0.1:6379").returncode == pytest.ExitCode.USAGE_ERROR


def test_without_database_url_and_redis_url_the_live_stack_tests_skip_and_say_what_to_set(monkeypatch):
    """Not a PostgreSQL or a Redis db 0 found on the machine: only what the developer named."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/9")
    with pytest.raises(pytest.skip.Exception, match="needs DATABASE_URL=postgres://"):
        live_stack.require_postgres_and_redis()

    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    monkeypatch.delenv("REDIS_URL")
    with pytest.raises(pytest.skip.Exception, match="needs REDIS_URL="):
        live_stack.require_postgres_and_redis()


def test_no_test_names_a_redis_server_of_its_own():
    """Redis addresses come from REDIS_URL, or are a port nothing listens on (tests/test_health.closed_port)."""
    hard_coded = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "tests").rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"redis://[^\"'{]*:6379", line) and path.name not in {"suite.py", "test_suite_safety.py"}
    ]
    assert hard_coded == []


LEAKS = """
import os

def test_a_leaks():
    os.environ["LEAKED_BY_A_TEST"] = "yes"

def test_b_runs_after_it():
    assert "LEAKED_BY_A_TEST" not in os.environ
"""


@pytest.mark.slow
def test_a_test_that_leaves_the_environment_changed_errors_and_the_next_one_does_not_see_it(tmp_path):
    done = run_pytest(tmp_path, LEAKS, "-p", "no:randomly", "-q", REDIS_URL="", DATABASE_URL="")

    assert "the test left os.environ changed: LEAKED_BY_A_TEST" in done.stdout, done.stdout + done.stderr
    assert "2 passed, 1 error" in done.stdout  # a's teardown errors; b passes: the variable was put back


@pytest.mark.slow
def test_the_run_says_its_order_seed_and_the_stores_it_used(tmp_path):
    done = run_pytest(tmp_path, "def test_nothing():\n    pass\n", "-q", REDIS_URL="", DATABASE_URL="")

    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Tests ran in random order: --randomly-seed=\d+", done.stdout)
    assert "Stores used: SQLite in memory, the local-memory cache (no Redis)" in done.stdout


def test_an_xdist_worker_takes_the_redis_database_after_the_given_one_by_its_index(monkeypatch, settings):
    """Every test empties its Redis database: two workers on one would empty each other's counters mid-test."""
    given = f"redis://127.0.0.1:{closed_port()}/9"  # nothing listens there: only the settings are looked at
    monkeypatch.setenv("REDIS_URL", given)
    settings.REDIS_URL = given
    monkeypatch.setitem(settings.CACHES["default"], "LOCATION", given)

    suite._give_this_worker_its_own_redis_database(given, 2)

    assert os.environ["REDIS_URL"] == settings.REDIS_URL == settings.CACHES["default"]["LOCATION"]
    assert os.environ["REDIS_URL"].endswith("/11")  # what the servers a test starts inherit too
    assert suite._with_redis_database("unix:///run/redis.sock?db=9&x=1", 10) == "unix:///run/redis.sock?x=1&db=10"
    port = given.split(":")[2].split("/")[0]
    assert f"Redis dbs 11-12 on 127.0.0.1:{port} (one per worker" in suite._stores_used(workers=2)


def test_a_worker_whose_redis_database_does_not_exist_stops_the_run_and_says_why():
    if not os.environ.get("REDIS_URL"):
        pytest.skip("asks a real Redis for its database 16; set REDIS_URL")
    last = live_stack.redis_url().rsplit("/", 1)[0] + "/15"
    with pytest.raises(pytest.UsageError, match="would use Redis database 16, which this Redis refuses"):
        suite._give_this_worker_its_own_redis_database(last, 1)  # Redis has 16 (0-15) unless configured otherwise


def test_this_workers_cache_is_its_own_redis_database():
    if not suite.REDIS_URL_GIVEN or suite._xdist_worker_index() is None:
        pytest.skip("a pytest-xdist run with REDIS_URL set (make test on PostgreSQL and Redis)")
    from django.core.cache import cache

    own = suite._redis_database(suite.REDIS_URL_GIVEN) + suite._xdist_worker_index()
    assert suite._redis_database(os.environ["REDIS_URL"]) == own
    assert cache._cache.get_client(write=True).connection_pool.connection_kwargs["db"] == own


def test_xdist_workers_choose_server_ports_in_separate_parts_of_the_range(monkeypatch):
    """pytest-randomly seeds `random` alike before every test in every worker: ports drawn from it would be the
    same in two workers at once, and both servers would try to bind the one port."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    chosen: dict[str, set[int]] = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        chosen[worker] = set()
        for _ in range(10):
            random.seed(1)
            chosen[worker].add(free_port())

    assert max(chosen["gw0"]) < min(chosen["gw1"])
    assert len(chosen["gw0"]) > 1 and len(chosen["gw1"]) > 1  # the seed does not decide the port
