"""Production settings, read the way the platform reads them: a fresh `manage.py` process with only the environment
an operator sets (no DEBUG, no pytest in the process)."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # an end-to-end test that takes seconds (pyproject.toml)

ROOT = Path(__file__).resolve().parent.parent


def production_env(**overrides: str | None) -> dict[str, str]:
    # Not what an operator sets: DJANGO_* comes from the test run (browser tests set DJANGO_ALLOW_ASYNC_UNSAFE).
    ignored = {"DEBUG", "SENTRY_DSN", "HTTPS_ONLY", "LOG_FORMAT", "TASK_BACKEND", "PUBLIC_BASE_URL"}
    env: dict[str, str | None] = {
        name: value for name, value in os.environ.items() if name not in ignored and not name.startswith("DJANGO")
    }
    env.update(
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="ingest.example.com",
        CSRF_TRUSTED_ORIGINS="https://ingest.example.com",
        PUBLIC_BASE_URL="https://ingest.example.com",
    )
    env.update(overrides)
    return {name: value for name, value in env.items() if value is not None}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_check_deploy_prints_no_warnings_under_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNINGS" not in result.stdout + result.stderr


def test_check_deploy_warns_when_https_is_turned_off():
    # The test above is not vacuous: the same command notices a weaker configuration.
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env(HTTPS_ONLY="0"))

    assert result.returncode != 0
    assert "security.W008" in result.stderr  # SECURE_SSL_REDIRECT
    assert "security.W012" in result.stderr  # SESSION_COOKIE_SECURE


def test_a_missing_secret_key_stops_start_up_with_a_clear_error():
    env = production_env()
    del env["SECRET_KEY"]

    result = manage("check", env=env)

    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured: SECRET_KEY is not set.")
    assert "token_urlsafe" in last_line  # it says how to make one


def test_production_settings_harden_https_cookies_and_headers():
    script = (
        "from django.conf import settings as s;"
        "print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE,"
        " s.CSRF_COOKIE_SECURE, s.CSRF_COOKIE_HTTPONLY, s.SECURE_PROXY_SSL_HEADER, s.CSRF_TRUSTED_ORIGINS,"
        " s.STORAGES['staticfiles']['BACKEND'])"
    )
    result = manage("shell", "--no-imports", "-c", script, env=production_env())

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "False",
        "True",
        "31536000",
        "True",
        "True",
        "True",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
        "['https://ingest.example.com']",
        "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ]


@pytest.mark.parametrize("name, value", [("LOG_FORMAT", "xml"), ("HTTPS_ONLY", "maybe")])
def test_a_setting_that_cannot_be_understood_stops_start_up(name, value):
    result = manage("check", env=production_env(**{name: value}))

    assert result.returncode != 0
    assert name in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("dsn", "active"), [(None, "False"), ("http://publickey@127.0.0.1:9/1", "True")])
def test_sentry_reports_errors_only_when_a_dsn_is_set(dsn, active):
    script = "import sentry_sdk; print(sentry_sdk.get_client().is_active())"
    result = manage("shell", "--no-imports", "-c", script, env=production_env(SENTRY_DSN=dsn))

    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == active


@pytest.mark.parametrize(("host", "offered"), [(None, "False"), ("smtp.example.com", "True")])
def test_password_resets_are_offered_only_with_an_smtp_server(host, offered):
    script = (
        "from django.conf import settings; from django.core import mail; "
        "print(settings.PASSWORD_RESET_BY_EMAIL, mail.mailers.default.host)"
    )
    env = production_env(EMAIL_HOST=host, EMAIL_HOST_USER="mailer", EMAIL_HOST_PASSWORD="pw")
    result = manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == [offered, host or "localhost"]
    assert "RemovedInDjango" not in result.stderr  # MAILERS, not the EMAIL_* settings Django 6.1 deprecates


def test_in_development_without_an_smtp_server_emails_are_printed_in_the_terminal():
    """docs/howto/use-the-console.md#try-password-reset-locally: `make run` (DEBUG) offers the reset and prints the
    email."""
    script = (
        "from django.conf import settings; from django.core import mail; "
        "mail.EmailMessage('Reset', 'Open http://127.0.0.1:8000/reset/MQ/abc-123/', to=['ada@example.com']).send(); "
        "print(settings.PASSWORD_RESET_BY_EMAIL)"
    )
    env = production_env(DEBUG="1", EMAIL_HOST=None)
    result = manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert "Open http://127.0.0.1:8000/reset/MQ/abc-123/" in result.stdout
    assert result.stdout.split()[-1] == "True"


def test_without_debug_the_default_task_backend_is_the_database_queue():
    code = "from django.conf import settings; print(settings.TASK_BACKEND)"
    result = manage("shell", "-c", code, env=production_env())
    assert result.stdout.strip().splitlines()[-1] == "database", result.stderr


def test_check_deploy_fails_without_a_public_base_url():
    result = manage("check", "--deploy", env=production_env(PUBLIC_BASE_URL=None))
    assert result.returncode != 0
    assert "assistant.E005" in result.stderr
