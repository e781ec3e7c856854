"""The suite's rules, as a pytest plugin (tests/conftest.py loads it; docs/howto/run-the-tests.md):

- a test that leaves os.environ changed errors at its teardown, and the environment is put back;
- REDIS_URL naming Redis database 0 stops the run before any test: the tests empty the database they are given;
- the last lines of a run say which stores it used and the random order's seed.

No Django import at module level: it is loaded before Django is set up."""

import os
from typing import Any

import pytest

_ENVIRONMENT_BEFORE = pytest.StashKey[dict[str, str]]()


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


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_EnvironmentLeftAsFound(), "environment-left-as-found")
    redis_url = os.environ.get("REDIS_URL")
    if redis_url and _redis_database(redis_url) == 0:
        raise pytest.UsageError(
            "REDIS_URL names Redis database 0, where your own data usually lives, and the tests empty the database "
            "they are given before every test. Give them one of their own, e.g. REDIS_URL=redis://127.0.0.1:6379/9."
        )


def _stores_used() -> str:
    """What this run touched, in words (docs/howto/run-the-tests.md)."""
    from django.conf import settings
    from django.db import connections

    database = connections["default"].settings_dict
    if database["ENGINE"].endswith("sqlite3"):
        used = "SQLite in memory"
    else:
        name = (database.get("TEST") or {}).get("NAME") or f"test_{database['NAME']}"
        used = f"PostgreSQL database {name} on {database['HOST']}:{database['PORT']} (made and dropped)"
    if settings.REDIS_URL:
        from redis.connection import parse_url

        where = parse_url(settings.REDIS_URL)
        place = where.get("path") or f"{where.get('host', '127.0.0.1')}:{where.get('port', 6379)}"
        used += f", Redis db {_redis_database(settings.REDIS_URL)} on {place} (emptied before each test)"
    else:
        used += ", the local-memory cache (no Redis)"
    return used


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The stores the run used, and the order's seed, last things printed (also under -q).
    `pytest --randomly-seed=<seed>` repeats an order; `-p no:randomly` runs the files in their written order."""
    terminalreporter.write_line(f"Stores used: {_stores_used()}")
    if config.pluginmanager.hasplugin("randomly") and config.getoption("randomly_reorganize", True):
        terminalreporter.write_line(f"Tests ran in random order: --randomly-seed={config.getoption('randomly_seed')}")
