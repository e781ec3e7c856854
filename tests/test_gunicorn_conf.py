"""gunicorn.conf.py: the numbers the platform's environment controls, and the counters' folder kept clean."""

import json
import os
import socket
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn import util as gunicorn_util


@pytest.fixture
def load(gunicorn_conf):
    """Reads gunicorn.conf.py under a given environment (tests/conftest.py undoes what it changes)."""
    return gunicorn_conf


def test_the_defaults_suit_a_small_machine_behind_a_router(load):
    conf = load()

    assert conf["bind"] == "0.0.0.0:8000"
    assert conf["workers"] == len(os.sched_getaffinity(0)) + 1
    assert conf["threads"] == 4 + 4  # WEB_THREADS, and a thread per receipt that may wait (RECEIPT_WAIT_SLOTS)
    # gthread, reading each request whole before a thread takes it (ops/slow_clients.py, tests/test_slow_clients.py)
    assert conf["worker_class"] == "ops.slow_clients.ReadDeadlineWorker"
    assert conf["ReadDeadlineWorker"].read_timeout == 10
    assert (conf["timeout"], conf["graceful_timeout"]) == (30, 25)  # both under the platform's 30 s SIGKILL
    assert conf["accesslog"] is None  # the app's JSON line is the access log
    assert conf["control_socket_disable"] is True
    assert conf["reuse_port"] is True  # the kernel spreads connections over the workers
    assert load(REUSE_PORT="off")["reuse_port"] is False
    conf["on_exit"](None)


def test_the_platform_sets_port_and_concurrency(load):
    conf = load(PORT="5123", BIND_HOST="127.0.0.1", WEB_CONCURRENCY="7", WEB_THREADS="2", GUNICORN_TIMEOUT="20")

    assert conf["bind"] == "127.0.0.1:5123"
    assert (conf["workers"], conf["threads"], conf["timeout"]) == (7, 2 + 4, 20)
    assert load(WEB_THREADS="2", RECEIPT_WAIT_SLOTS="0")["threads"] == 2
    conf["on_exit"](None)


def test_the_access_log_names_no_header_query_string_or_user(load):
    conf = load()
    log_format = conf["access_log_format"]

    assert "}i)s" not in log_format  # no request header of any kind, so never Authorization
    for atom in ("%(r)s", "%(q)s", "%(u)s"):  # request line with query string, query string, Basic-auth user
        assert atom not in log_format
    assert "%({x-request-id}o)s" in log_format
    assert load(ACCESS_LOG="on")["accesslog"] == "-"
    conf["on_exit"](None)


def test_a_client_cannot_write_a_line_of_the_access_log(load):
    from gunicorn.config import Config
    from gunicorn.glogging import SafeAtoms

    conf = load()
    forged = '/api/v1/inbound/x\n127.0.0.1 "GET /admin/ HTTP/1.1" 200\x00\x1b[2J'  # what %0A, %00 and %1B decode to
    environ = {"REQUEST_METHOD": "GET", "RAW_URI": forged, "PATH_INFO": forged, "SERVER_PROTOCOL": "HTTP/1.1"}
    response = SimpleNamespace(status="404 Not Found", headers=[], sent=0)

    atoms = conf["logger_class"](Config()).atoms(response, [], environ, timedelta(milliseconds=3))
    line = conf["access_log_format"] % SafeAtoms(atoms)  # as gunicorn writes the line

    assert "\n" not in line and "\x00" not in line and "\x1b" not in line
    assert "/api/v1/inbound/x\\x0a127.0.0.1 " in line and "200\\x00\\x1b[2J" in line  # escaped, still readable
    conf["on_exit"](None)


def test_each_server_gets_its_own_counters_folder_and_removes_it(load):
    conf = load()
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    assert folder.is_dir()
    assert folder.name.startswith("gunicorn-metrics-")

    conf["on_exit"](None)

    assert not folder.exists()


def test_an_operators_counters_folder_is_emptied_at_start_and_kept(load, tmp_path):
    (tmp_path / "counter_4242.db").write_bytes(b"from the last run")
    (tmp_path / "notes.txt").write_text("not ours")
    conf = load(PROMETHEUS_MULTIPROC_DIR=str(tmp_path))

    conf["on_starting"](None)
    conf["on_exit"](None)

    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("status", "reason", "code"),
    [(414, "URI Too Long", "uri_too_long"), (431, "Request Header Fields Too Large", "headers_too_large"),
     (400, "Bad Request", "bad_request"), (500, "Internal Server Error", "internal_error")],
)  # fmt: skip
def test_requests_gunicorn_refuses_itself_are_answered_in_the_api_s_error_shape(load, status, reason, code):
    conf = load()
    assert gunicorn_util.write_error is conf["write_json_error"]  # what the workers' handle_error calls
    ours, theirs = socket.socketpair()
    with ours, theirs:
        gunicorn_util.write_error(ours, status, reason, "Invalid Request Line '<script>'")
        ours.shutdown(socket.SHUT_WR)
        answer = theirs.makefile("rb").read()

    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == f"HTTP/1.1 {status} {reason}"
    assert {"Content-Type: application/json", "Connection: close", f"Content-Length: {len(body)}"} <= set(lines)
    payload = json.loads(body)
    assert (payload["success"], payload["code"]) == (False, code) and payload["message"]
    assert b"<script>" not in answer  # nothing of the refused request is echoed
    conf["on_exit"](None)
