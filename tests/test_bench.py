"""Smoke tests for the benchmark harness (bench/): its measurements run, and its baseline route stays out of
production. No timings are asserted here; `make bench` measures them."""

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection
from django.test import override_settings

from bench.harness import stand_in
from bench.measure import database_cpu_per_request, key_check_costs, python_calls_per_request, queries_of_request
from conversations.models import Delivery, Message
from tests.conftest import CURRENT
from tests.servers import send_json, serving

BASELINE = "/bench/baseline"


def test_the_query_log_sees_the_accepted_request_s_statements(v2):
    counted = queries_of_request(CURRENT, {"message": "hi"}, f"Bearer {v2[1]}")

    assert counted.status == 200
    # After the warm-up the key is remembered: no lookup, but its check (in the WITH statement on PostgreSQL).
    assert "EXISTS (SELECT 1 FROM" in counted.work[0]
    written = " ".join(counted.work)  # one WITH statement on PostgreSQL, the check and one INSERT each elsewhere
    assert f"INSERT INTO {connection.ops.quote_name(Message._meta.db_table)}" in written
    assert f"INSERT INTO {connection.ops.quote_name(Delivery._meta.db_table)}" in written
    assert not any(s.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")) for s in counted.work)


def test_a_malformed_key_shows_no_statement(db):
    counted = queries_of_request(CURRENT, {"message": "hi"}, "Bearer psk_typo")

    assert counted.status == 401
    assert counted.work == []


def test_the_baseline_view_is_one_insert_of_the_same_row(v2):
    key, _ = v2
    with override_settings(
        ROOT_URLCONF="bench.urls", BENCH_CONVERSATION_ID=key.owner.conversation.pk, BENCH_API_KEY_ID=key.pk
    ):
        counted = queries_of_request(BASELINE, {"message": "hi", "n": 1}, None)

    assert counted.status == 200
    assert [s.split()[0] for s in counted.work] == ["INSERT"]
    assert Message.objects.filter(context={"message": "hi", "n": 1}).count() == 2  # warm-up and measured request


@pytest.mark.django_db
def test_production_has_no_baseline_route(client):
    response = client.post(BASELINE, data="{}", content_type="application/json")
    assert response.status_code == 404


def test_the_key_check_micro_benchmark_compares_three_checks():
    costs = key_check_costs(fast_rounds=10, pbkdf2_rounds=1, pbkdf2_iterations=1000)

    assert len(costs["seconds_per_check"]) == 3
    assert all(seconds > 0 for seconds in costs["seconds_per_check"].values())


def test_the_python_work_of_a_request_is_counted(v2):
    # A body with more members to check costs more calls: the count is the request's own work. (An accepted
    # message no longer costs more than a refused one: its ordinary case skips DRF, ingestion/accept.py.)
    small = python_calls_per_request(CURRENT, {"message": "hi"}, f"Bearer {v2[1]}", requests=2)
    large = {"message": "hi", **{f"member {n}": [n, {"text": "x"}] for n in range(50)}}
    larger = python_calls_per_request(CURRENT, large, f"Bearer {v2[1]}", requests=2)

    assert larger > small > 0


def test_the_database_cpu_of_a_request_is_read_where_postgresql_is_local(v2):
    seconds = database_cpu_per_request(CURRENT, {"message": "hi"}, f"Bearer {v2[1]}", requests=2)

    if connection.vendor == "postgresql":
        assert seconds is not None and seconds >= 0
    else:
        assert seconds is None


def test_the_profile_summary_reads_stacks_whose_frame_names_span_lines(tmp_path, capsys):
    from bench.profile import print_hottest

    collapsed = tmp_path / "profile.txt"
    collapsed.write_text("main;handle;count (script 'if x\nthen y') 3\nmain;handle 1\nmain;log 2\n")

    print_hottest(collapsed)

    shares = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert shares == ["100.0%  main", "66.7%  handle", "50.0%  count (script 'if x then y')", "33.3%  log"]


# A stand-in that tells whether Nagle's algorithm is off on the socket it answers on (TCP_NODELAY nonzero).
NODELAY_REPORTER = """
import socket
class H(Handler):
    def do_GET(self):
        self.answer(200, str(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)).encode())
"""


def test_the_stand_ins_answer_with_nagle_off():
    """An answer is two writes (headers, body): with Nagle on, the body waited ~40 ms for the client's delayed ACK,
    and every delivery the benchmarks measured carried it."""
    process, port = stand_in(NODELAY_REPORTER)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/")
        assert connection.getresponse().read() != b"0"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_tests_fake_servers_answer_with_nagle_off():
    """tests/servers.py's send_json, which the fake runtimes and providers answer with, turns Nagle off first."""
    seen: list[int] = []
    answered = threading.Event()

    class Reporter(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            send_json(self, 200, b"{}")
            seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            answered.set()

        def log_message(self, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Reporter)) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        connection.request("GET", "/")
        connection.getresponse().read()
        connection.close()
        assert answered.wait(10)
    assert seen[0] != 0


def test_the_suite_timer_sums_a_junit_report_per_test_file(tmp_path):
    from bench.suite_time import file_durations

    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_readme" name="test_one" time="1.5"/>'
        '<testcase classname="tests.test_readme.TestGroup" name="test_two@serial" time="2.0"/>'
        '<testcase classname="tests.browser.test_poke_cli" name="test_three" time="0.25"/>'
        "</testsuite></testsuites>"
    )

    assert file_durations(report) == {"tests/test_readme.py": 3.5, "tests/browser/test_poke_cli.py": 0.25}
