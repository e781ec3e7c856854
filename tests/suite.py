"""The suite's rules, as a pytest plugin (tests/conftest.py loads it; docs/howto/run-the-tests.md):

- a test that leaves os.environ changed errors at its teardown, and the environment is put back;
- REDIS_URL naming Redis database 0 stops the run before any test: the tests empty the database they are given;
- under pytest-xdist each worker empties a Redis database of its own: REDIS_URL's number plus the worker's index;
- under pytest-xdist the tests that share a worker by an `xdist_group` mark, then the `slow` ones, are handed out
  first, so that no long test starts last while the other workers sit idle;
- the last lines of a run say which stores it used and the random order's seed.

No Django import at module level: it is loaded before Django is set up."""

import os
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

_ENVIRONMENT_BEFORE = pytest.StashKey[dict[str, str]]()
REDIS_URL_GIVEN = os.environ.get("REDIS_URL", "")  # before a pytest-xdist worker takes a database of its own


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}  # pytest's own


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


class _EnvironmentLeftAsFound:
    """A test that changes os.environ and leaves it changed (after its fixtures, monkeypatch included, were torn
    down) errors at its teardown, and the environment is put back: a leak would otherwise break whichever tests
    happen to run after it, and the suite runs in random order (pytest-randomly). Session and module fixtures may
    hold a variable for their lifetime (the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE). A plugin's hooks see session
    fixtures being set up (a conftest's would not: they are set up for the session, outside tests/)."""

    def __init__(self) -> None:
        self.held_by_broader_fixtures: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
        if fixturedef.scope == "function":
            return (yield)
        before = _environment()
        try:
            return (yield)
        finally:
            self.held_by_broader_fixtures.update(_changed(before, _environment()))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        item.stash[_ENVIRONMENT_BEFORE] = _environment()  # before any of the test's fixtures runs
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        result = yield
        before = item.stash.get(_ENVIRONMENT_BEFORE, None)
        if before is None:
            return result
        after = _environment()
        leaked = sorted(_changed(before, after) - self.held_by_broader_fixtures)
        if not leaked:
            return result
        for name in leaked:
            if name in before:
                os.environ[name] = before[name]
            else:
                del os.environ[name]
        raise pytest.fail.Exception(f"the test left os.environ changed: {', '.join(leaked)} (use monkeypatch)")


def _redis_database(url: str) -> int:
    from redis.connection import parse_url

    return int(parse_url(url).get("db") or 0)


def _with_redis_database(url: str, database: int) -> str:
    """url naming Redis database `database` instead (redis://host/<db>, or unix:///socket?db=<db>)."""
    parts = urlsplit(url)
    query = [(name, value) for name, value in parse_qsl(parts.query) if name != "db"]
    if parts.scheme == "unix":
        return f"unix://{parts.netloc}{parts.path}?{urlencode([*query, ('db', str(database))])}"  # keeps the ///
    return parts._replace(path=f"/{database}", query=urlencode(query)).geturl()


def _xdist_worker_index() -> int | None:
    """0, 1, ... in a pytest-xdist worker (which xdist names gw0, gw1, ... in the environment); None elsewhere."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def _give_this_worker_its_own_redis_database(redis_url: str, index: int) -> None:
    """Every test empties the Redis database it is given (tests/conftest.py's cache.clear()): two workers sharing
    one would empty each other's counters mid-test. Worker n takes REDIS_URL's database plus n, in the settings
    (Django has made no cache connection yet) and in the environment, which the servers a test starts inherit."""
    import redis
    from django.conf import settings

    own = _with_redis_database(redis_url, _redis_database(redis_url) + index)
    try:
        redis.Redis.from_url(own, socket_connect_timeout=3).ping()
    except redis.ResponseError as error:  # "DB index is out of range": Redis has 16 unless configured otherwise
        raise pytest.UsageError(
            f"test worker {index} would use Redis database {_redis_database(own)}, which this Redis refuses "
            f"({error}). Give REDIS_URL a lower number, or fewer workers (-n)."
        ) from error
    except redis.RedisError:
        pass  # unreachable: the tests that need Redis say so themselves
    os.environ["REDIS_URL"] = own
    settings.REDIS_URL = own
    settings.CACHES["default"]["LOCATION"] = own


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_EnvironmentLeftAsFound(), "environment-left-as-found")
    redis_url = os.environ.get("REDIS_URL")
    if redis_url and _redis_database(redis_url) == 0:
        raise pytest.UsageError(
            "REDIS_URL names Redis database 0, where your own data usually lives, and the tests empty the database "
            "they are given before every test. Give them one of their own, e.g. REDIS_URL=redis://127.0.0.1:6379/9."
        )
    index = _xdist_worker_index()
    if redis_url and index is not None:
        _give_this_worker_its_own_redis_database(redis_url, index)


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, which stays the order within each kind
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the grouped tests (one worker runs a group end to end), then the slow ones, then the
    rest: a long test handed out last would leave the other workers idle until it ends. Every worker collects,
    and sorts, the same list (one seed for all), as xdist requires."""
    if _xdist_worker_index() is None:
        return
    items.sort(key=_handed_out_rank)


def _handed_out_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("xdist_group"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this run started (0 without xdist, or with -n 0)."""
    if not config.pluginmanager.hasplugin("xdist") or config.getoption("dist") == "no":
        return 0
    return len(config.getoption("tx") or [])


def _stores_used(workers: int) -> str:
    """What this run touched, in words (docs/howto/run-the-tests.md)."""
    from django.conf import settings
    from django.db import connections

    database = connections["default"].settings_dict
    if database["ENGINE"].endswith("sqlite3"):
        used = "SQLite in memory"
    else:
        name = (database.get("TEST") or {}).get("NAME") or f"test_{database['NAME']}"
        if workers > 1:  # pytest-django's suffix per pytest-xdist worker
            name = f"{name}_gw0 to {name}_gw{workers - 1}"
        used = f"PostgreSQL database {name} on {database['HOST']}:{database['PORT']} (made and dropped)"
    if settings.REDIS_URL:
        from redis.connection import parse_url

        where = parse_url(settings.REDIS_URL)
        place = where.get("path") or f"{where.get('host', '127.0.0.1')}:{where.get('port', 6379)}"
        first = _redis_database(settings.REDIS_URL)
        if workers > 1:
            used += f", Redis dbs {first}-{first + workers - 1} on {place} (one per worker, emptied before each test)"
        else:
            used += f", Redis db {first} on {place} (emptied before each test)"
    else:
        used += ", the local-memory cache (no Redis)"
    return used


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The stores the run used, and the order's seed, last things printed (also under -q).
    `pytest --randomly-seed=<seed>` repeats an order; `-p no:randomly` runs the files in their written order."""
    terminalreporter.write_line(f"Stores used: {_stores_used(_xdist_workers(config))}")
    if config.pluginmanager.hasplugin("randomly") and config.getoption("randomly_reorganize", True):
        terminalreporter.write_line(f"Tests ran in random order: --randomly-seed={config.getoption('randomly_seed')}")
