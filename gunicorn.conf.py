"""gunicorn settings for the PaaS (`web: gunicorn --config gunicorn.conf.py config.wsgi` in the Procfile).

Every number can be changed from the environment; the defaults suit a 2-core machine. See docs/howto/deploy.md.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gunicorn import util as gunicorn_util
from gunicorn.glogging import Logger

# The project folder is on sys.path: gunicorn changes to it before it reads this file.
from ops.errors import error_body
from ops.redaction import RedactResetLinks, redact_query, redact_text, secret_route
from ops.slow_clients import ReadDeadlineWorker


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def _cores() -> int:
    # The cores this process may run on (a container's CPU set), not every core of the host.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# --- Where and how many -------------------------------------------------------------------------------------------
# All interfaces by default: the platform's router reaches the process from outside its network namespace.
bind = f"{os.environ.get('BIND_HOST', '0.0.0.0')}:{_env_int('PORT', 8000)}"  # noqa: S104
# A request is mostly Python work between two short database round trips: processes, one per core and one more,
# do the work; a few threads each keep a core busy while one of them waits for PostgreSQL or Redis. The platform
# may set WEB_CONCURRENCY for its machine size. Database connections in use: workers x threads.
workers = _env_int("WEB_CONCURRENCY", _cores() + 1)
# Besides WEB_THREADS, one thread per receipt that may wait (?wait=N, at most RECEIPT_WAIT_SLOTS at once per process,
# ingestion/listing.py): a waiting receipt sleeps in its thread, so that waiting never takes a thread that accepts.
threads = _env_int("WEB_THREADS", 4) + _env_int("RECEIPT_WAIT_SLOTS", 4)
# gthread, with a deadline for reading each request (ops/slow_clients.py): a client that sends half a request and
# waits would otherwise keep a thread for ever, and a few dozen of them stop the service.
worker_class = "ops.slow_clients.ReadDeadlineWorker"
# The router queues connections; this only bounds what waits in the kernel.
backlog = 512
# Each worker listens on its own socket (SO_REUSEPORT) and the kernel spreads new connections over them. With one
# shared socket, whichever worker wakes first accepts a burst of keep-alive connections and keeps them: in
# `make bench` one worker once held all 32 connections, serving 287 requests/s on one core with a third of the
# machine idle. The cost: connections still waiting in an exiting worker's queue are reset, which happens only when
# workers stop (a deploy, a crash); REUSE_PORT=off goes back to the shared socket.
reuse_port = os.environ.get("REUSE_PORT", "on").strip().lower() not in ("off", "0", "false", "no")

# --- Time limits ----------------------------------------------------------------------------------------------------
# A worker silent for longer than this is killed and replaced (Heroku's router gives up after 30 s anyway).
timeout = _env_int("GUNICORN_TIMEOUT", 30)
# On SIGTERM (a deploy, a restart) workers stop accepting and finish what they hold for up to this long. PaaS
# platforms send SIGKILL 30 s after SIGTERM, so finish before that.
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 25)
# A request's headers and body must arrive within this many seconds of a thread taking it, or it is answered 408
# and the connection closed (ops/slow_clients.py). Scripts send a few hundred bytes; even a slow phone needs far less.
ReadDeadlineWorker.read_timeout = _env_int("REQUEST_READ_TIMEOUT", 10)
# Keep idle connections from the router open a little, so it can reuse them.
keepalive = _env_int("GUNICORN_KEEPALIVE", 5)
# Heartbeat files in memory, not on a disk that can stall (containers often have a slow overlay /tmp).
_SHARED_MEMORY = "/dev/shm"  # noqa: S108 (gunicorn creates its own private files inside)
worker_tmp_dir = _SHARED_MEMORY if os.path.isdir(_SHARED_MEMORY) else None

# --- Logs -----------------------------------------------------------------------------------------------------------
# The app writes one JSON line per request (ops/middleware.py), so gunicorn's own access line is off unless
# ACCESS_LOG=on: two lines per request cost a twentieth of a worker's time and say the same thing. When on, lines go
# to stdout and the format names its fields one by one: no request headers (so never Authorization), no query
# string, no "%(u)s" (the user name of Basic auth); the request id ties the line to the app's JSON line.
accesslog = "-" if os.environ.get("ACCESS_LOG", "off").strip().lower() in ("on", "1", "true", "yes") else None
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms request_id=%({x-request-id}o)s "%(a)s"'


class RedactingLogger(Logger):
    """gunicorn's logger, writing a password reset link's path, or a CLI log-in poll's, as its route
    (ops/redaction.py): the token in one opens the account, the device code in the other collects a key. Every atom
    an access log format could name is covered: %(U)s, the request line %(r)s and the
    environ's {path_info}e and {raw_uri}e; and the error log's lines."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        self.error_log.addFilter(RedactResetLinks())  # "Error handling request <uri>" names the path

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        candidates = (environ.get("PATH_INFO") or "", (environ.get("RAW_URI") or "").split("?", 1)[0])
        for secret in {path for path in candidates if secret_route(path)}:
            route = secret_route(secret) or ""
            for name, value in atoms.items():
                if isinstance(value, str) and secret in value:
                    atoms[name] = value.replace(secret, route)
        # A query that holds a secret (BlueBubbles' webhook URL): in the request line %(r)s, the raw URI, or alone.
        query = environ.get("QUERY_STRING") or ""
        safe_query = redact_query(environ.get("PATH_INFO") or "", query)
        for name, value in atoms.items():
            if isinstance(value, str):
                safe = redact_text(value.replace(query, safe_query) if query != safe_query else value)
                atoms[name] = safe.translate(_ESCAPED)
        return atoms


# The path arrives percent-decoded: a %0A in it would end the access line there and let the client write the next
# one. Control characters are written as escapes instead, as Apache's and nginx's access logs do.
_ESCAPED = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]}


logger_class = RedactingLogger
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
# Several servers may share a machine (tests, benchmarks); none of them needs gunicorn's control socket.
control_socket_disable = True

# --- Prometheus counters shared by the workers ----------------------------------------------------------------------
# prometheus_client keeps each worker's counters in files under this directory and a scrape adds them up. It must
# be set before a worker imports the app, and emptied when the server starts: files from an earlier run would
# be added in. Each server gets its own directory unless the operator names one.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="gunicorn-metrics-")
_metrics_dir = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def on_starting(server: Any) -> None:
    _metrics_dir.mkdir(parents=True, exist_ok=True)
    for stale in _metrics_dir.glob("*.db"):
        stale.unlink()


def post_worker_init(worker: Any) -> None:
    # The app is loaded, its request threads not yet started: the first requests would otherwise import the
    # URLconf and the packages it leads into on several threads at once (ops/preload.py).
    from ops.preload import import_before_threads

    import_before_threads()


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, str(_metrics_dir))


def on_exit(server: Any) -> None:
    if _metrics_dir.name.startswith("gunicorn-metrics-"):
        shutil.rmtree(_metrics_dir, ignore_errors=True)


# --- Requests gunicorn refuses itself -------------------------------------------------------------------------------
# A request line over limit_request_line (4094 bytes), too many or too large headers, a malformed request or an
# unsupported transfer coding never reaches Django: gunicorn answers it, by default with a small HTML page. Our
# clients are scripts that read JSON, so these answers take the API's error shape instead, with gunicorn's status.
# Nothing from the refused request is echoed back.
_REFUSALS = {
    400: ("bad_request", "The request is not valid HTTP/1.1: check its request line, its headers and its framing."),
    403: ("forbidden", "The request was refused."),
    408: ("request_timeout", "The request did not arrive in time. Send the headers and the body without pausing."),
    414: ("uri_too_long", "The request line is too long. Send the data in the JSON body, not in the URL."),
    417: ("expectation_failed", "The Expect header asks for something this server does not do; send none."),
    431: ("headers_too_large", "The request's headers are too many or too large. Send fewer or shorter headers."),
    501: ("not_implemented", "The request's transfer coding is not supported. Send the body with a Content-Length."),
}
_FAILED = ("internal_error", "Something went wrong on our side. Retry, and contact support if it persists.")


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's util.write_error, answering in the API's error shape (mesg, which may quote the request, unused)."""
    code, message = _REFUSALS.get(status_int, _FAILED)
    body = json.dumps(error_body(code, message)).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Cache-Control: no-store\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


# The workers' handle_error calls util.write_error by name; set here in the master, forked workers inherit it.
gunicorn_util.write_error = write_json_error
