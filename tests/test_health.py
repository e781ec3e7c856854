"""/healthz (the process answers) and /readyz (the database and the cache answer), for platform probes."""

import socket

import pytest
from django.db import connection
from django.test import override_settings


def closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_healthz_answers_without_touching_the_database(client):
    # No django_db mark: any database access here would raise instead of answering.
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_probes_answer_a_platform_that_addresses_the_process_by_ip_over_plain_http(client):
    # Host validation and the HTTPS redirect come after the probes, so a probe needs neither a known host nor TLS.
    with override_settings(SECURE_SSL_REDIRECT=True):
        response = client.get("/healthz", headers={"Host": "10.1.2.3:8000"})
    assert response.status_code == 200


@pytest.mark.django_db
def test_readyz_is_ok_when_the_database_and_the_cache_answer(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "cache": "ok"}}


@pytest.mark.django_db
def test_readyz_is_503_when_the_cache_is_unreachable(client):
    unreachable = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    with override_settings(CACHES={"default": unreachable}):
        response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {"database": "ok", "cache": "unreachable"}}
    assert response["Retry-After"] == "5"


@pytest.fixture
def unreachable_database():
    """Points the default connection at a port where no database listens; yields the function that points it back,
    which also runs afterwards."""
    if connection.vendor == "sqlite":
        pytest.skip("the in-memory SQLite test database cannot be closed; PostgreSQL runs (and CI) cover this")
    saved = dict(connection.settings_dict)

    def restore() -> None:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)

    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
    yield restore
    restore()


@pytest.mark.django_db(transaction=True)
def test_readyz_is_503_when_the_database_is_unreachable(client, unreachable_database):
    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {"database": "unreachable", "cache": "ok"}}


@pytest.mark.django_db(transaction=True)
def test_readyz_recovers_by_itself_when_the_database_comes_back(client, unreachable_database):
    assert client.get("/readyz").status_code == 503

    unreachable_database()

    assert client.get("/readyz").status_code == 200


def test_probes_are_only_get_and_head(client):
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 404
