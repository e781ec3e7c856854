"""Settings for the message ingestion service: one module, every value from the environment.

Defaults are the embedded single-process setup (`make run`, `make test`): SQLite in the project folder and the
local-memory cache. Production sets DATABASE_URL, REDIS_URL, SECRET_KEY and ALLOWED_HOSTS (see docs/howto/deploy.md).
"""

import ipaddress
import sys
from pathlib import Path
from typing import Any

import dj_database_url
import phonenumbers
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from assistant.signing import secret_bytes
from config.env import env_bool, env_choice, env_float, env_int, env_list, env_rate, env_str, env_timestamp

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
# The test runner imports this module too; it must not need a production secret.
TESTING = "pytest" in sys.modules

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set it to a long random value "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))'), or set DEBUG=1 for local development."
        )
    SECRET_KEY = "insecure-development-key-never-use-in-production-0123456789"
# Earlier keys, comma-separated: what they signed (sessions, password-reset links) still verifies, and the webhook
# triggers' secrets derived from them still work, while SECRET_KEY is rotated (docs/howto/backups-and-upgrades.md).
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Bottom to top (docs/explanation/architecture.md#the-layers): identity, the thread, the assistant and its
    # hand-off, the ways in.
    "accounts",
    "keys",
    "devices",
    "triggers",
    "conversations",
    "connections",
    "reminders",
    "assistant",
    "delivery",
    "ingestion",
    "channels",
    "console",
    # After "delivery", whose db_worker command (the old name of its worker, which runs django-tasks-db's loop beside
    # the delivery engine) takes precedence over the one of the same name here.
    "django_tasks_db",
]

MIDDLEWARE = [
    "ops.middleware.OperatorEndpointsMiddleware",  # /healthz, /readyz, metrics: before host checks and redirects
    "ops.middleware.ApiPathsMiddleware",  # /api/v1//inbound/… is /api/v1/inbound/…; HTTPS redirects in JSON
    "ops.request_id.RequestIdMiddleware",
    "ops.middleware.RequestTelemetryMiddleware",  # after the request id, which its log line carries
    "ops.limits.RateLimitHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "ops.admin_lists.NoNulInAdminQueriesMiddleware",  # a list filter's value holding a NUL: 400, not PostgreSQL's error
    "console.login_limits.LoginLimitMiddleware",  # a blocked address's log-in POST: 429 before the form is read
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's login and flash-message middleware, passed through by /api/v1/ (see the module).
    "console.middleware.AuthenticationMiddleware",
    "console.middleware.MessageMiddleware",
    "console.middleware.PersonTimeZoneMiddleware",  # pages show times in the person's zone (Settings)
    "ops.visible.VisibleTextMiddleware",  # pages show control and direction characters instead of obeying them
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "ops.public_url.RememberRequestHostMiddleware",  # DEBUG without PUBLIC_BASE_URL only (see the module)
]

ROOT_URLCONF = "config.urls"
# ops/preload.py imports these, with the URLconf, in a process's main thread before its second thread starts.
# Modules that code imports inside a function (on first use, to keep other commands' start short, or to break an
# import circle): the assistant's backends (assistant/backends/__init__.py), the hand-off task's engine, the OAuth
# sign-ins of MCP servers, and the libraries of calendars, mailboxes, local time parsing and JSON Web Tokens.
IMPORTED_ON_FIRST_USE = (
    "assistant.backends.approved",
    "assistant.backends.local",
    "assistant.backends.openai",
    "assistant.backends.webhook",
    "connections.oauth.mcp",
    "delivery.engine",
    "caldav.davclient",
    "caldav.lib.error",
    "dateparser.date",
    "icalendar",
    "jwt",
    "lxml.etree",
    "lxml.html",
    "mcp.shared.auth",
    "niquests",
    "recurring_ical_events",
)
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.console_section",
                "django.template.context_processors.csp",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------------------
# SQLite by default. WAL plus BEGIN IMMEDIATE and a busy timeout make concurrent writers queue for the lock
# instead of failing with "database is locked".
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif "postgresql" in DATABASES["default"]["ENGINE"] and env_bool("DATABASE_PREPARED_STATEMENTS", True):
    # Server-side binding lets psycopg prepare a statement once it has run a few times on a connection, so PostgreSQL
    # parses and plans the hot path's statements (the key lookup, the INSERTs) once per connection instead of once
    # per request: about 45% less database CPU per accepted message (docs/benchmarks.md). Turn it off behind a
    # transaction-pooling PgBouncer that cannot keep prepared statements.
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": True,
        "prepare_threshold": 5,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with a health check that sends no SELECT 1 while the connection is quiet (see the module).
    DATABASES["default"]["ENGINE"] = "ingestion.hotpath.postgresql"
if "postgresql" in DATABASES["default"]["ENGINE"]:
    # Persistent connections (CONN_MAX_AGE, health-checked before reuse), not Django's psycopg pool: connections
    # are per thread, and a gunicorn thread serves one request at a time, so each thread keeping its own connection
    # already is a pool of exactly the right size, with no checkout per request and no pool thread per worker.
    # Connections in use = WEB_CONCURRENCY x WEB_THREADS per web process (+5 per worker process: its task loop, the
    # delivery engine's claimer and its DELIVERY_RECORDERS recorders; +1 for release);
    # keep that under the plan's connection limit (docs/howto/deploy.md#database-connections). A server that does
    # not answer fails the request (503) and /readyz within DATABASE_CONNECT_TIMEOUT seconds instead of hanging the
    # thread.
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = env_int("DATABASE_CONNECT_TIMEOUT", 5)
    # A shared pool instead (psycopg_pool, at most this many connections per process): for processes with many
    # threads that each use the database briefly. Off by default: no process of ours needs it.
    DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 0)
    if DATABASE_POOL_SIZE > 0:
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": 1, "max_size": DATABASE_POOL_SIZE, "timeout": 30}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache ----------------------------------------------------------------------------------------------------
# Rate-limit counters must be shared by every process: Redis wherever more than one process serves.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            # Django's RedisCache with a one-round-trip atomic incr (see ingestion/hotpath/cache.py).
            "BACKEND": "ingestion.hotpath.cache.AtomicIncrRedisCache",
            "LOCATION": REDIS_URL,
            # Lets several deployments (or test runs) share one Redis database without sharing counters.
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX"),
            # Fail fast (503, /readyz) rather than hold a worker thread when Redis does not answer.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Auth and console -----------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "keys:list"
LOGOUT_REDIRECT_URL = "landing"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# The language and conventions of the dates and times people read (accounts/words.py, Babel's CLDR data):
# en_GB says "Mon 30 Nov, 09:00", en_US "Mon, Nov 30, 9:00 AM". The words around them are English.
PERSON_LOCALE = env_str("PERSON_LOCALE", "en_GB")

# --- Static files ---------------------------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG or TESTING
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- The API --------------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    # Every key-authenticated method declares the scope it needs (ingestion/scopes.py).
    "DEFAULT_PERMISSION_CLASSES": ["ingestion.scopes.KeyScopes"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["ingestion.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "ingestion.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    # Per-key limit on every endpoint authenticated by an API key (views without a key are not counted).
    "DEFAULT_THROTTLE_CLASSES": ["ingestion.throttling.ApiKeyRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# Largest accepted request body, in bytes (docs/design.md#limits: 256 KiB).
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 262144)
# How deeply a JSON body may nest; deeper bodies are refused before they reach the database.
INGEST_MAX_JSON_DEPTH = env_int("INGEST_MAX_JSON_DEPTH", 64)
# When the legacy endpoint was deprecated (its Deprecation header, RFC 9745) and, optionally, when it will be
# removed (its Sunset header, RFC 8594): ISO dates such as 2027-06-30, read as midnight UTC.
LEGACY_DEPRECATED_AT = env_timestamp("LEGACY_DEPRECATED_ON", "2026-01-01")
LEGACY_SUNSET_AT = env_timestamp("LEGACY_SUNSET_ON", "")
# The key's last-used time is written at most this often, so that a busy key does not cost a write per request.
KEY_LAST_USED_RESOLUTION_SECONDS = 60
# Each worker remembers the V2 keys it found valid for this long, so a key's next message needs no lookup; the
# message's own insert confirms the key still holds (ingestion/hotpath/recent.py), so revocation still counts from the
# next request. 0 looks every key up. At most API_KEY_CACHE_SIZE keys per process.
API_KEY_CACHE_SECONDS = env_int("API_KEY_CACHE_SECONDS", 60)
API_KEY_CACHE_SIZE = env_int("API_KEY_CACHE_SIZE", 1000)  # about 2 KB each

# --- Email: password resets -------------------------------------------------------------------------------------
# "Forgot your password?" is offered only when an SMTP server is configured (EMAIL_HOST): without one the reset link
# (a secret that opens the account) would have nowhere to go but a log. TLS on port 587 unless told otherwise.
_EMAIL_HOST = env_str("EMAIL_HOST", "")
# Without EMAIL_HOST nothing here sends mail; the mailer is then SMTP on localhost:25 (Django's old default), so
# that anything that did would fail to connect rather than print the message to a log.
_SMTP_OPTIONS: dict[str, Any] = (
    {
        "host": _EMAIL_HOST,
        "port": env_int("EMAIL_PORT", 587),
        "username": env_str("EMAIL_HOST_USER", ""),
        "password": env_str("EMAIL_HOST_PASSWORD", ""),
        "use_tls": env_bool("EMAIL_USE_TLS", True),
        "timeout": 10,
    }
    if _EMAIL_HOST
    else {"host": "localhost", "port": 25}
)
# In development (DEBUG, `make run`) without EMAIL_HOST, emails are printed in the server's terminal instead, so that
# password reset can be tried locally: the link is there to open.
_EMAIL_TO_TERMINAL = DEBUG and not _EMAIL_HOST and not TESTING
MAILERS = {
    "default": (
        {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
        if _EMAIL_TO_TERMINAL
        else {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": _SMTP_OPTIONS}
    )
}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Assistant Inbox <no-reply@localhost>")
PASSWORD_RESET_BY_EMAIL = bool(_EMAIL_HOST) or _EMAIL_TO_TERMINAL
PASSWORD_RESET_TIMEOUT = 60 * 60  # a reset link works for an hour (Django's default is three days)
# Reset emails asked for per client address (each one mails whoever owns the address typed in).
PASSWORD_RESET_RATE_LIMIT = env_rate("PASSWORD_RESET_RATE_LIMIT", "5/h")
# Sign-ups per client address (each one costs a password hash, some 0.5 s of a core); the last one pauses sign-ups
# from the address until the window ends.
SIGNUP_RATE_LIMIT = env_rate("SIGNUP_RATE_LIMIT", "5/h")
# Sign-ups confirmed by a link by email, so that the sign-up page does not tell whether an address has an account
# (console/signup_confirmation.py). On where an SMTP server is configured; off in development and tests.
SIGNUP_EMAIL_CONFIRMATION = env_bool("SIGNUP_EMAIL_CONFIRMATION", bool(_EMAIL_HOST))
# Active (unrevoked) API keys one account may hold: each key has its own rate limit, so keys without number would
# multiply an account's sending rate. Revoking a key makes room for another.
MAX_ACTIVE_KEYS_PER_ACCOUNT = env_int("MAX_ACTIVE_KEYS_PER_ACCOUNT", 20)
# Active webhook triggers one account may hold (triggers.services.create_trigger refuses more).
MAX_ACTIVE_TRIGGERS_PER_ACCOUNT = env_int("MAX_ACTIVE_TRIGGERS_PER_ACCOUNT", 100)
# A phone number typed without its country code (console sign-up and settings) is read as a number of the browser's
# region (Accept-Language) or, failing that, of this one (ISO 3166 code: US, GB, DE, ...; accounts/phones.py).
PHONE_DEFAULT_REGION = env_str("PHONE_DEFAULT_REGION", "US").upper()
if PHONE_DEFAULT_REGION not in phonenumbers.SUPPORTED_REGIONS:
    raise ImproperlyConfigured(
        f"PHONE_DEFAULT_REGION must be a two-letter region code such as US or GB; got {PHONE_DEFAULT_REGION!r}"
    )

# --- Limits and retries (docs/design.md#limits and #idempotency) -----------------------------------------------
# Rates in django-ratelimit's syntax: a count per s, m, h or d, with an optional multiplier (60/m, 1000/h, 10/30s).
# Counters live in the Django cache, so they hold across processes only with REDIS_URL set.
# Requests per API key (fixed window); over it, 429 rate_limited with Retry-After.
INGEST_RATE_LIMIT = env_rate("INGEST_RATE_LIMIT", "60/m")
# Receipt reads per API key, counted apart from sending (a script polling a receipt must not use up its sends).
RECEIPT_RATE_LIMIT = env_rate("RECEIPT_RATE_LIMIT", "300/m")
# Receipts that wait (?wait=N) at once per web process; each holds a gunicorn thread, asleep, while it waits, and
# gunicorn.conf.py adds that many threads to WEB_THREADS (docs/reference/api.md#waiting-for-the-answer).
RECEIPT_WAIT_SLOTS = env_int("RECEIPT_WAIT_SLOTS", 4)
# Failed authentications per client address (IPv4 address, IPv6 /64); over it, the address is refused with 429 for
# the rest of the window before any database query, whatever key it sends.
AUTH_FAILURE_RATE_LIMIT = env_rate("AUTH_FAILURE_RATE_LIMIT", "30/m")
# `poke login` (ingestion/cli_auth.py), per client address: log-in codes requested, and polls (the CLI polls every
# 2 seconds, 30 a minute).
CLI_AUTH_CODE_RATE_LIMIT = env_rate("CLI_AUTH_CODE_RATE_LIMIT", "10/h")
CLI_AUTH_POLL_RATE_LIMIT = env_rate("CLI_AUTH_POLL_RATE_LIMIT", "60/m")
# A poll of one device code sooner than this after its last answered poll is answered slow_down (RFC 8628 3.5). The
# interval we announce is 2 s; the margin covers timer jitter of clients that keep to it (the poke CLI sleeps 2 s).
CLI_AUTH_POLL_MIN_SECONDS = env_float("CLI_AUTH_POLL_MIN_SECONDS", 1.5)
# Wrong user codes typed on /device per client address before it is paused (guessing a code is the attack).
DEVICE_CODE_FAILURE_RATE_LIMIT = env_rate("DEVICE_CODE_FAILURE_RATE_LIMIT", "10/15m")
# Failed log-ins (console and admin) per client address; over it, every log-in from the address is refused (429)
# until the window ends, whatever the password (console/login_limits.py).
LOGIN_FAILURE_RATE_LIMIT = env_rate("LOGIN_FAILURE_RATE_LIMIT", "10/15m")
# How many proxies in front of the app append the peer's address to X-Forwarded-For (1 behind a PaaS router).
# 0 uses the connection's address; the client-written start of X-Forwarded-For is never trusted.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)
# Which connections may be proxies whose X-Forwarded-For counts: "private" (the default: the private, shared and
# loopback ranges a PaaS router connects from), comma-separated networks, or "*" for any (ops/client_ip.py).
TRUSTED_PROXY_NETWORKS = env_str("TRUSTED_PROXY_NETWORKS", "private")
if TRUSTED_PROXY_NETWORKS.strip().lower() not in ("", "private", "*"):
    for _network in TRUSTED_PROXY_NETWORKS.split(","):
        try:
            ipaddress.ip_network(_network.strip(), strict=False)
        except ValueError as _error:
            raise ImproperlyConfigured(
                f"TRUSTED_PROXY_NETWORKS: {_error} (give networks such as 10.0.0.0/8, or private, or *)"
            ) from None
# How long an Idempotency-Key and the first response to it are kept (`manage.py pruneidempotencykeys` removes older).
IDEMPOTENCY_KEY_TTL_SECONDS = env_int("IDEMPOTENCY_KEY_TTL_SECONDS", 24 * 60 * 60)
# How long a webhook trigger remembers a GitHub delivery (its X-GitHub-Delivery and signed body) to acknowledge a
# replay without a second message; GitHub redelivers for 3 days (`manage.py prunetriggerdeliveries` removes older).
TRIGGER_DELIVERY_RETENTION_SECONDS = env_int("TRIGGER_DELIVERY_RETENTION_SECONDS", 7 * 24 * 60 * 60)
# Retention (ops/pruning.py): how long the queue's finished entries and the logs are kept, in days. A message itself
# is the person's history and stays until they delete it; its delivery's final status is kept on it.
DELIVERY_RETENTION_DAYS = env_int("DELIVERY_RETENTION_DAYS", 90)  # delivered or failed, with their tool calls
OUTBOX_RETENTION_DAYS = env_int("OUTBOX_RETENTION_DAYS", 90)  # texts sent or given up on
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 400)  # an account's audit log
# Every prune deletes this many rows per transaction, and a run stops after PRUNE_RUN_SECONDS (the next goes on).
PRUNE_BATCH_ROWS = env_int("PRUNE_BATCH_ROWS", 1000)
PRUNE_RUN_SECONDS = env_int("PRUNE_RUN_SECONDS", 120)

# --- OpenAPI (drf-spectacular; the docs page's assets come from the sidecar package, not a CDN) -------------------
SPECTACULAR_SETTINGS = {
    "TITLE": "Message ingestion API",
    "DESCRIPTION": (
        "Send an instruction into a person's assistant conversation with a Bearer API key. "
        "Every error is JSON: {success: false, message, code}."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "PREPROCESSING_HOOKS": ["ingestion.openapi.only_public_endpoints"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "ingestion.openapi.tidy_paths_and_bodies",
    ],
}

# --- The assistant hand-off ---------------------------------------------------------------------------------
# After a message commits, a django.tasks task hands it to the assistant. "immediate" runs the task in the
# request's process right after the commit (the single-process default and the tests); "database" queues it in
# PostgreSQL for `manage.py worker` (production); any other value is a backend class path
# (docs/explanation/handoff.md).
# The default is the production path, also under `make run` (whose `manage.py serve` runs the worker in-process);
# only the tests default to immediate.
TASK_BACKEND = env_str("TASK_BACKEND", "immediate" if TESTING else "database")
_TASK_BACKEND_CLASSES = {
    "immediate": "django.tasks.backends.immediate.ImmediateBackend",
    "database": "django_tasks_db.DatabaseBackend",
}
TASKS = {"default": {"BACKEND": _TASK_BACKEND_CLASSES.get(TASK_BACKEND, TASK_BACKEND)}}

ASSISTANT_BACKEND = env_choice("ASSISTANT_BACKEND", "local", ["local", "webhook", "openai"])
# Attempts per delivery before it fails; the wait after attempt n is BASE * 2**(n-1) seconds, at most MAX.
ASSISTANT_MAX_ATTEMPTS = env_int("ASSISTANT_MAX_ATTEMPTS", 5)
ASSISTANT_RETRY_BASE_SECONDS = env_float("ASSISTANT_RETRY_BASE_SECONDS", 30)
ASSISTANT_RETRY_MAX_SECONDS = env_float("ASSISTANT_RETRY_MAX_SECONDS", 3600)
# Each wait is shortened at random by up to this fraction of itself, so that deliveries that failed together (an
# outage of the assistant's runtime) do not all retry at the same moment. 0 keeps the waits exact.
ASSISTANT_RETRY_JITTER = env_float("ASSISTANT_RETRY_JITTER", 0.2)
# How long one remote attempt may take (connect and answer).
ASSISTANT_TIMEOUT_SECONDS = env_float("ASSISTANT_TIMEOUT_SECONDS", 10)
# The largest answer read from the assistant runtime (webhook or OpenAI-compatible): a larger one is refused, counted
# while it is read, whatever its framing (ops/bounded.py).
ASSISTANT_MAX_ANSWER_BYTES = env_int("ASSISTANT_MAX_ANSWER_BYTES", 1_000_000)
# How many of the latest thread messages (this one included) go to a remote assistant.
ASSISTANT_THREAD_MESSAGES = env_int("ASSISTANT_THREAD_MESSAGES", 20)

# The delivery engine (`manage.py worker` with TASK_BACKEND=database; docs/explanation/handoff.md).
# Attempts in flight per worker process: threads waiting on the assistant, each with a keep-alive connection to it.
# The process's database connections stay at 1 + DELIVERY_RECORDERS whatever this is.
DELIVERY_CONCURRENCY = env_int("DELIVERY_CONCURRENCY", 32)
# Threads recording outcomes (one statement each), each with its own database connection.
DELIVERY_RECORDERS = env_int("DELIVERY_RECORDERS", 3)
# At most this many deliveries claimed by one statement.
DELIVERY_CLAIM_BATCH = env_int("DELIVERY_CLAIM_BATCH", 64)
# On SIGTERM: how long attempts in flight may still finish before they are put back (platforms SIGKILL after 30 s).
DELIVERY_GRACE_SECONDS = env_float("DELIVERY_GRACE_SECONDS", 20)
# How long an attempt holds its delivery unless renewed; the worker renews every third of it while the attempt runs,
# so a dead or cut-off worker's deliveries are taken over at most this long after its last renewal.
DELIVERY_LEASE_SECONDS = env_float("DELIVERY_LEASE_SECONDS", 30)
# Takeovers (a lease expired: the worker died mid-attempt) before a delivery fails, so that a message that kills its
# worker does not hold its thread forever.
DELIVERY_MAX_TAKEOVERS = env_int("DELIVERY_MAX_TAKEOVERS", 3)
# Threads (one database connection each) doing the database work of attempts in flight: tool calls' ledger and the
# built-in tools (ops/database_work.py). Attempt threads themselves hold no connection.
DELIVERY_DATABASE_THREADS = env_int("DELIVERY_DATABASE_THREADS", 2)
# An attempt nobody renews (the immediate task backend) holds its lease for the longest attempt plus this margin.
DELIVERY_LEASE_MARGIN_SECONDS = env_float("DELIVERY_LEASE_MARGIN_SECONDS", 20)

ASSISTANT_WEBHOOK_URL = env_str("ASSISTANT_WEBHOOK_URL")
# The Standard Webhooks secret shared with the runtime: it signs our requests and verifies its callbacks.
_WEBHOOK_SECRET = env_str("ASSISTANT_WEBHOOK_SECRET")
try:
    ASSISTANT_WEBHOOK_KEY = secret_bytes(_WEBHOOK_SECRET) if _WEBHOOK_SECRET else b""
except ValueError as error:
    raise ImproperlyConfigured(f"ASSISTANT_WEBHOOK_SECRET: {error}.") from None
# How far a callback's webhook-timestamp may be from our clock (Standard Webhooks suggests five minutes).
ASSISTANT_CALLBACK_TOLERANCE_SECONDS = env_int("ASSISTANT_CALLBACK_TOLERANCE_SECONDS", 300)

OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENAI_API_KEY = env_str("OPENAI_API_KEY").strip()  # a key pasted with its line break would be refused
OPENAI_MODEL = env_str("OPENAI_MODEL", "gpt-4o-mini")
ASSISTANT_SYSTEM_PROMPT = env_str(
    "ASSISTANT_SYSTEM_PROMPT",
    "You are the user's personal assistant. Messages reach you from the user's own scripts, apps and automations "
    "through their API keys, and are meant as if the user had typed them. A message may carry structured context "
    "as JSON. Answer the user briefly and say plainly what you did; never claim an action no tool performed.",
)

# --- The outbox to the people's channels (channels/outbound/; docs/explanation/outbox.md) ----------------------
# The channel sender (`manage.py worker`, its `channels` kind): sends in flight per process (threads waiting on a
# provider) and the rows claimed by one statement. The process holds two database connections whatever these are.
CHANNEL_CONCURRENCY = env_int("CHANNEL_CONCURRENCY", 64)
CHANNEL_CLAIM_BATCH = env_int("CHANNEL_CLAIM_BATCH", 64)
# A send's lease, renewed every third of it while its worker lives; a dead worker's sends are taken over when it
# ends, and a send whose workers died this many times more fails (delivery/leases.py).
CHANNEL_LEASE_SECONDS = env_float("CHANNEL_LEASE_SECONDS", 30)
CHANNEL_MAX_TAKEOVERS = env_int("CHANNEL_MAX_TAKEOVERS", 3)
# A failed send the provider may get over (it was down, slow, or rate-limited us) is tried again after 10 s, 20 s,
# 40 s... at most this long apart, each wait shortened at random by up to the jitter, at most this many times.
CHANNEL_MAX_ATTEMPTS = env_int("CHANNEL_MAX_ATTEMPTS", 6)
CHANNEL_RETRY_BASE_SECONDS = env_float("CHANNEL_RETRY_BASE_SECONDS", 10)
CHANNEL_RETRY_MAX_SECONDS = env_float("CHANNEL_RETRY_MAX_SECONDS", 1800)
CHANNEL_RETRY_JITTER = env_float("CHANNEL_RETRY_JITTER", 0.2)
# On SIGTERM: how long the sends in flight may still finish before they are put back.
CHANNEL_GRACE_SECONDS = env_float("CHANNEL_GRACE_SECONDS", 20)

# --- MCP connections and tools (docs/explanation/assistant-tools.md) ---------------------------------------------
# How long one MCP exchange (initialize + tools/list, or a tool call) may take.
MCP_TIMEOUT_SECONDS = env_float("MCP_TIMEOUT_SECONDS", 15)
# Checks of a server while a person waits (adding or syncing a connection): a shorter deadline, and at most this
# many at once per web process (well below its WEB_THREADS) and per account; beyond, 503 or 429 at once
# (connections/checks.py).
# (Under pytest as long as a tool call's: a loaded CI machine, not the server, is what makes a local check slow.)
MCP_CHECK_TIMEOUT_SECONDS = env_float("MCP_CHECK_TIMEOUT_SECONDS", 15 if TESTING else 5)
MCP_CHECKS_PER_PROCESS = env_int("MCP_CHECKS_PER_PROCESS", max(1, env_int("WEB_THREADS", 4) // 2))
MCP_CHECKS_PER_ACCOUNT = env_int("MCP_CHECKS_PER_ACCOUNT", 1)
# The most one MCP exchange may read from the server, all its answers together (counted while reading).
MCP_MAX_ANSWER_BYTES = env_int("MCP_MAX_ANSWER_BYTES", 4_000_000)
# Whether MCP server URLs may point inside our network (loopback, private, link-local). On in development and
# tests (local servers); off in production, where it would let a user make this server reach internal services.
MCP_ALLOW_PRIVATE_ADDRESSES = env_bool("MCP_ALLOW_PRIVATE_ADDRESSES", DEBUG or TESTING)
# Fernet keys for the servers' API keys at rest, newest first (connections/crypto.py); empty: derived from SECRET_KEY.
MCP_ENCRYPTION_KEYS = env_list("MCP_ENCRYPTION_KEYS")
# OAuth sign-ins (MCP servers, mail and calendar; connections/oauth/): how long one exchange with an authorization
# server may take and the most it may answer; whether its endpoints may be plain http (development and tests only:
# codes, tokens and client secrets would travel in clear); how long before an access token expires it is refreshed.
OAUTH_TIMEOUT_SECONDS = env_float("OAUTH_TIMEOUT_SECONDS", 10)
OAUTH_MAX_ANSWER_BYTES = env_int("OAUTH_MAX_ANSWER_BYTES", 1_000_000)
OAUTH_ALLOW_HTTP = env_bool("OAUTH_ALLOW_HTTP", DEBUG or TESTING)
OAUTH_REFRESH_MARGIN_SECONDS = env_float("OAUTH_REFRESH_MARGIN_SECONDS", 60)
# Mail (IMAP + SMTP) and calendar (CalDAV) connections (docs/howto/connect-calendar-mailbox.md): the most one
# tool call may take (less when the attempt's deadline is nearer). Checking one when it is added takes
# MCP_CHECK_TIMEOUT_SECONDS.
MAIL_CALENDAR_TIMEOUT_SECONDS = env_float("MAIL_CALENDAR_TIMEOUT_SECONDS", 15)
# Whether IMAP/SMTP without TLS and http:// CalDAV are accepted: the app password would travel in clear. On in
# development and tests (local servers without certificates); off in production.
MAIL_CALENDAR_ALLOW_PLAINTEXT = env_bool("MAIL_CALENDAR_ALLOW_PLAINTEXT", DEBUG or TESTING)
# The most one mail or calendar operation (an IMAP session, an SMTP session, a CalDAV operation of a few requests)
# may read from the server, all its answers together, counted while they are read (ops/bounded.py).
MAIL_CALENDAR_MAX_ANSWER_BYTES = env_int("MAIL_CALENDAR_MAX_ANSWER_BYTES", 10_000_000)
# The most all the answers one process is reading at once (every thread's, from every server: calendars, mailboxes,
# MCP, OAuth, the assistant runtime, providers) may hold together; a read past it fails at once, "busy"
# (ops/bounded.py, docs/explanation/limits.md). At least the largest bound above, or that answer never fits.
PROCESS_MAX_ANSWER_BYTES = env_int("PROCESS_MAX_ANSWER_BYTES", 50_000_000)

# Google and Microsoft mail and calendar over OAuth (docs/howto/connect-google-microsoft.md): the operator's OAuth
# app for each (empty client id: the console offers no "Connect" button for it). The endpoints and servers are the
# providers' own; the tests point them at servers on 127.0.0.1.
GOOGLE_OAUTH_CLIENT_ID = env_str("GOOGLE_OAUTH_CLIENT_ID", "")
GOOGLE_OAUTH_CLIENT_SECRET = env_str("GOOGLE_OAUTH_CLIENT_SECRET", "")
GOOGLE_OAUTH_AUTHORIZATION_URL = env_str(
    "GOOGLE_OAUTH_AUTHORIZATION_URL", "https://accounts.google.com/o/oauth2/v2/auth"
)
GOOGLE_OAUTH_TOKEN_URL = env_str("GOOGLE_OAUTH_TOKEN_URL", "https://oauth2.googleapis.com/token")
GOOGLE_OAUTH_REVOCATION_URL = env_str("GOOGLE_OAUTH_REVOCATION_URL", "https://oauth2.googleapis.com/revoke")
GOOGLE_OAUTH_ISSUER = env_str("GOOGLE_OAUTH_ISSUER", "https://accounts.google.com")
GOOGLE_IMAP = env_str("GOOGLE_IMAP", "imap.gmail.com:993:ssl")  # host:port:security (ssl, starttls or none)
GOOGLE_SMTP = env_str("GOOGLE_SMTP", "smtp.gmail.com:465:ssl")
GOOGLE_CALDAV_URL = env_str("GOOGLE_CALDAV_URL", "https://apidata.googleusercontent.com/caldav/v2/")
MICROSOFT_OAUTH_CLIENT_ID = env_str("MICROSOFT_OAUTH_CLIENT_ID", "")
MICROSOFT_OAUTH_CLIENT_SECRET = env_str("MICROSOFT_OAUTH_CLIENT_SECRET", "")
# "common" (work, school and personal accounts), "organizations", "consumers", or your tenant's id or domain.
MICROSOFT_OAUTH_TENANT = env_str("MICROSOFT_OAUTH_TENANT", "common")
MICROSOFT_OAUTH_AUTHORIZATION_URL = env_str(
    "MICROSOFT_OAUTH_AUTHORIZATION_URL", "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize"
)
MICROSOFT_OAUTH_TOKEN_URL = env_str(
    "MICROSOFT_OAUTH_TOKEN_URL", "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
)
# Microsoft's identity platform has no RFC 7009 revocation endpoint: empty, removing deletes our copy of the tokens.
MICROSOFT_OAUTH_REVOCATION_URL = env_str("MICROSOFT_OAUTH_REVOCATION_URL", "")
MICROSOFT_IMAP = env_str("MICROSOFT_IMAP", "outlook.office365.com:993:ssl")
MICROSOFT_SMTP = env_str("MICROSOFT_SMTP", "smtp.office365.com:587:starttls")
# Microsoft calendars have no CalDAV interface: they are read and written through Microsoft Graph's REST API.
MICROSOFT_GRAPH_URL = env_str("MICROSOFT_GRAPH_URL", "https://graph.microsoft.com/v1.0")
# The tool-calling loop of the openai backend: at most this many rounds of tool calls, and this long in all.
ASSISTANT_TOOL_ROUNDS = env_int("ASSISTANT_TOOL_ROUNDS", 6)
ASSISTANT_TOOL_SECONDS = env_float("ASSISTANT_TOOL_SECONDS", 120)
# How long the person may answer a request to approve a side-effecting tool (assistant/approval/requests.py); after it
# the action is not done and the assistant says so.
APPROVAL_TIMEOUT_SECONDS = env_int("APPROVAL_TIMEOUT_SECONDS", 86400)
# How many requests may wait for one person's answer at once: asked for by one API key (its follow-ups included) or
# one webhook trigger, and in all. Past either, a call is not asked (the assistant is told the requests wait), and an
# identical request still waiting is never asked twice (docs/explanation/approval.md#few-requests-few-texts).
APPROVAL_OPEN_PER_ASKER = env_int("APPROVAL_OPEN_PER_ASKER", 10)
APPROVAL_OPEN_PER_PERSON = env_int("APPROVAL_OPEN_PER_PERSON", 25)
# And led to by one message, its tools' follow-ups (and theirs) included: a cascade stops here.
APPROVAL_OPEN_PER_MESSAGE = env_int("APPROVAL_OPEN_PER_MESSAGE", 8)
# Requests texted one by one to a person's phone per window; past them one text says more wait, and the rest of the
# window's requests are in the thread only.
APPROVAL_TEXTS_PER_WINDOW = env_int("APPROVAL_TEXTS_PER_WINDOW", 3)
APPROVAL_TEXT_WINDOW_SECONDS = env_int("APPROVAL_TEXT_WINDOW_SECONDS", 600)
# How often each worker (manage.py worker, serve) expires unanswered approvals and fires reminders a lost task left; the
# prunes run every 60 such periods (delivery/housekeeping.py). 0: the worker does none of it (run the commands
# from cron instead).
HOUSEKEEPING_SECONDS = env_int("HOUSEKEEPING_SECONDS", 60)
if not 0 <= HOUSEKEEPING_SECONDS <= 86400:  # beyond a day the hourly prunes' period (60 of these) overflows a date
    raise ImproperlyConfigured(
        f"HOUSEKEEPING_SECONDS must be 0 (no housekeeping in the worker) to 86400; got {HOUSEKEEPING_SECONDS}"
    )
# Follow-ups from long-running tools (the poke.mcp callback protocol): how many one tool call may send, and how
# soon after the previous one the next may come.
MCP_FOLLOW_UP_LIMIT = env_int("MCP_FOLLOW_UP_LIMIT", 10)
MCP_FOLLOW_UP_INTERVAL_SECONDS = env_float("MCP_FOLLOW_UP_INTERVAL_SECONDS", 2)
# This server's public address: follow-ups are posted back to it, and the channel providers call it (their
# signatures are computed over PUBLIC_BASE_URL + path, so it must be exactly what is pasted into their consoles).
# Required in production (`check --deploy`); under DEBUG without it, tools are told the address requests come to
# (ops/public_url.py), so `make run PORT=8700` gets its follow-ups.
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
PUBLIC_BASE_URL_FROM_ENV = bool(env_str("PUBLIC_BASE_URL"))

# --- Channels (channels/; docs/design.md#channels) ---------------------------------------------------------------
# One set of provider credentials per deployment. A channel whose settings are incomplete is not offered anywhere
# (channels/adapters/__init__.py says which settings each needs). Secrets are stripped: one pasted with its line
# break would be refused by the provider.
TWILIO_ACCOUNT_SID = env_str("TWILIO_ACCOUNT_SID").strip()
TWILIO_AUTH_TOKEN = env_str("TWILIO_AUTH_TOKEN").strip()
TWILIO_SMS_FROM = env_str("TWILIO_SMS_FROM").strip()  # +E.164 or a Messaging Service SID (MG...)
TWILIO_WHATSAPP_FROM = env_str("TWILIO_WHATSAPP_FROM").strip()  # +E.164 of the WhatsApp sender
TWILIO_WHATSAPP_TEMPLATE_SID = env_str("TWILIO_WHATSAPP_TEMPLATE_SID").strip()  # HX...: outside the 24-hour window
TWILIO_API_BASE_URL = env_str("TWILIO_API_BASE_URL", "https://api.twilio.com").rstrip("/")
WHATSAPP_CLOUD_ACCESS_TOKEN = env_str("WHATSAPP_CLOUD_ACCESS_TOKEN").strip()
WHATSAPP_CLOUD_PHONE_NUMBER_ID = env_str("WHATSAPP_CLOUD_PHONE_NUMBER_ID").strip()
WHATSAPP_CLOUD_APP_SECRET = env_str("WHATSAPP_CLOUD_APP_SECRET").strip()
WHATSAPP_CLOUD_VERIFY_TOKEN = env_str("WHATSAPP_CLOUD_VERIFY_TOKEN").strip()
WHATSAPP_CLOUD_API_BASE_URL = env_str("WHATSAPP_CLOUD_API_BASE_URL", "https://graph.facebook.com/v23.0").rstrip("/")
# Outside WhatsApp's 24-hour window: the name and language code of a template Meta approved for the business, whose
# body has one variable {{1}} (the text goes there); without a name, such texts are held until the person writes.
WHATSAPP_CLOUD_TEMPLATE_NAME = env_str("WHATSAPP_CLOUD_TEMPLATE_NAME").strip()
WHATSAPP_CLOUD_TEMPLATE_LANGUAGE = env_str("WHATSAPP_CLOUD_TEMPLATE_LANGUAGE", "en_US").strip()
BLUEBUBBLES_URL = env_str("BLUEBUBBLES_URL").rstrip("/")
BLUEBUBBLES_PASSWORD = env_str("BLUEBUBBLES_PASSWORD").strip()
BLUEBUBBLES_WEBHOOK_SECRET = env_str("BLUEBUBBLES_WEBHOOK_SECRET").strip()
TELEGRAM_BOT_TOKEN = env_str("TELEGRAM_BOT_TOKEN").strip()
TELEGRAM_BOT_USERNAME = env_str("TELEGRAM_BOT_USERNAME").strip().lstrip("@")
TELEGRAM_WEBHOOK_SECRET = env_str("TELEGRAM_WEBHOOK_SECRET").strip()
TELEGRAM_API_BASE_URL = env_str("TELEGRAM_API_BASE_URL", "https://api.telegram.org").rstrip("/")
# How long one call to a provider may take before it counts as failed (and, for a send, retryable).
CHANNEL_TIMEOUT_SECONDS = env_float("CHANNEL_TIMEOUT_SECONDS", 10)
# The largest answer read from a provider's API (Twilio, Meta, Telegram, BlueBubbles), counted while it is read.
CHANNEL_MAX_ANSWER_BYTES = env_int("CHANNEL_MAX_ANSWER_BYTES", 1_000_000)
# The largest callback body a provider's request may have; anything bigger is refused (413) unread.
CHANNEL_MAX_BODY_BYTES = env_int("CHANNEL_MAX_BODY_BYTES", 262144)
# Each web process remembers the linked addresses it heard from lately (their row, person and thread) for this long,
# so that their next message needs no lookup; the message's own insert still checks that the address is linked to
# that person and the account active, so unlinking counts from the next message (channels/senders.py). 0 looks every
# address up. At most CHANNEL_SENDER_CACHE_SIZE addresses per process.
CHANNEL_SENDER_CACHE_SECONDS = env_int("CHANNEL_SENDER_CACHE_SECONDS", 60)
CHANNEL_SENDER_CACHE_SIZE = env_int("CHANNEL_SENDER_CACHE_SIZE", 1000)  # under 1 KB each
# Linking: a code (or Telegram link) lives this long, allows this many wrong entries, and a person may ask for this
# many codes, an address receive this many, per hour.
LINK_CODE_TTL_SECONDS = env_int("LINK_CODE_TTL_SECONDS", 600)
LINK_CODE_MAX_TRIES = env_int("LINK_CODE_MAX_TRIES", 5)
LINK_CODE_RATE_LIMIT = env_rate("LINK_CODE_RATE_LIMIT", "5/h")
LINK_CODE_ADDRESS_RATE_LIMIT = env_rate("LINK_CODE_ADDRESS_RATE_LIMIT", "3/h")

# --- Logging --------------------------------------------------------------------------------------------------
# One JSON object per line in production (ops/jsonlog.py), readable text for development. Each request gets one
# line from the "access" logger (ops/middleware.py); errors carry their traceback and request id.
LOG_FORMAT = env_str("LOG_FORMAT", "text" if DEBUG else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "ops.jsonlog.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    # A password reset link's token never reaches a log line (ops/redaction.py).
    "filters": {"redact_reset_links": {"()": "ops.redaction.RedactResetLinks"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["redact_reset_links"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Refused requests already have their access line; from django.request only server errors, with tracebacks.
    # The filter here too: Django's own handlers (its DEBUG console) receive django.request's lines as well.
    "loggers": {
        "django.request": {"level": "ERROR", "filters": ["redact_reset_links"]},
        # The MCP SDK and its HTTP client log every request with its URL at INFO; an MCP server's URL may carry a
        # token in its query, and the callback URL we send along is one.
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}

# --- Production: HTTPS, security headers, operators' endpoints, error reporting ------------------------------
# The PaaS router terminates TLS and tells us the original scheme in X-Forwarded-Proto (it overwrites whatever a
# client sent). HTTPS_ONLY (on unless DEBUG or under pytest) redirects plain HTTP, sends HSTS and marks cookies
# Secure; turn it off only for a server that is really reached over plain HTTP.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
HTTPS_ONLY = env_bool("HTTPS_ONLY", not (DEBUG or TESTING))
SECURE_SSL_REDIRECT = HTTPS_ONLY
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if HTTPS_ONLY else 0)
# Every subdomain must be HTTPS too before these two are safe; set them to 0 if one is not.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
SESSION_COOKIE_SECURE = HTTPS_ONLY
CSRF_COOKIE_SECURE = HTTPS_ONLY
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True  # forms carry the token; no script needs to read the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Django's own Content Security Policy: nothing inline unless it carries the per-response nonce (the admin's few
# inline blocks do), nothing from other origins, no framing. Templates use static files, not inline code.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Prometheus metrics (ops/metrics.py) at METRICS_PATH, only for a bearer token and/or from listed client networks;
# with neither set the path does not exist (404).
METRICS_PATH = env_str("METRICS_PATH", "/metrics")
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS")

SENTRY_DSN = env_str("SENTRY_DSN")
if SENTRY_DSN:
    from ops.sentry import init_sentry

    init_sentry(SENTRY_DSN, traces_sample_rate=env_float("SENTRY_TRACES_SAMPLE_RATE", 0.0))

if TESTING:
    # Tests create many users; the real hasher's deliberate slowness would dominate the suite's run time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
