"""In-process measurements: SQL statements per request (from Django's query log), the work one request costs in
Python and in PostgreSQL, and the cost of one key check.

Function calls and database CPU per request barely move when other programs load the machine, unlike requests per
second, so they show what a change did. Kept free of timing assertions so the test suite can run them once.
"""

import cProfile
import hashlib
import json
import pstats
import secrets
import timeit
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.server import cpu_seconds
from keys import tokens
from keys.models import Generation

# Statements that open, close or nest a transaction; the budget counts the work around them.
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


@dataclass(frozen=True)
class QueryCount:
    status: int
    statements: list[str]  # every statement the request sent, in order

    @property
    def work(self) -> list[str]:
        return [s for s in self.statements if not s.upper().startswith(TRANSACTION_CONTROL)]


def queries_of_request(path: str, body: Any, authorization: str | None, client: Client | None = None) -> QueryCount:
    """POST once (after one warm-up request, so per-key first-use writes are not counted) and log its SQL."""
    client = client or Client(HTTP_HOST="127.0.0.1")
    headers = {"Authorization": authorization} if authorization else {}
    data = json.dumps(body)
    client.post(path, data=data, content_type="application/json", headers=headers)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(path, data=data, content_type="application/json", headers=headers)
    return QueryCount(response.status_code, [q["sql"] for q in captured.captured_queries])


def _post(client: Client, path: str, data: str, authorization: str | None) -> int:
    headers = {"Authorization": authorization} if authorization else {}
    return client.post(path, data=data, content_type="application/json", headers=headers).status_code


def python_calls_per_request(path: str, body: Any, authorization: str | None, requests: int = 20) -> float:
    """Python function calls per request (cProfile's count, which is deterministic), after a warm-up."""
    client, data = Client(HTTP_HOST="127.0.0.1"), json.dumps(body)
    for _ in range(3):
        _post(client, path, data, authorization)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(requests):
        _post(client, path, data, authorization)
    profiler.disable()
    return pstats.Stats(profiler).total_calls / requests


def database_cpu_per_request(path: str, body: Any, authorization: str | None, requests: int = 200) -> float | None:
    """Seconds of CPU the PostgreSQL backend serving this process spends per request (best of three rounds), or
    None when that backend is not a local process."""
    if connection.vendor != "postgresql":
        return None
    client, data = Client(HTTP_HOST="127.0.0.1"), json.dumps(body)
    for _ in range(10):  # also lets psycopg prepare the statements it repeats
        _post(client, path, data, authorization)
    pid = connection.connection.info.backend_pid
    rounds = []
    for _ in range(3):
        before = cpu_seconds(pid)
        for _ in range(requests):
            _post(client, path, data, authorization)
        after = cpu_seconds(pid)
        if before is None or after is None:  # PostgreSQL runs elsewhere (or as a user we cannot see)
            return None
        rounds.append((after - before) / requests)
    return min(rounds)


def _per_call_seconds(check: Any, number: int) -> float:
    """The best of three timings of `number` calls, per call (the minimum is the least disturbed by other load)."""
    return min(timeit.repeat(check, number=number, repeat=3)) / number


def key_check_costs(fast_rounds: int = 20000, pbkdf2_rounds: int = 3, pbkdf2_iterations: int = 0) -> dict[str, Any]:
    """Seconds per check of one presented key: ours, Django's PBKDF2 hasher, and a SHA-512 digest compare.

    PBKDF2 runs with Django's default iteration count unless `pbkdf2_iterations` says otherwise (the smoke test).
    """
    plaintext = tokens.generate(Generation.V2)
    pbkdf2 = PBKDF2PasswordHasher()
    if pbkdf2_iterations:
        pbkdf2.iterations = pbkdf2_iterations
    pbkdf2_encoded = pbkdf2.encode(plaintext, pbkdf2.salt())
    sha512_stored = hashlib.sha512(plaintext.encode()).hexdigest()

    def ours() -> None:
        # Shape, checksum and SHA-256 digest; the digest is then found through a unique index.
        assert tokens.recognise(plaintext) is not None

    def django_pbkdf2() -> None:
        assert pbkdf2.verify(plaintext, pbkdf2_encoded)

    def sha512() -> None:
        assert secrets.compare_digest(hashlib.sha512(plaintext.encode()).hexdigest(), sha512_stored)

    costs = {
        "ours (format + CRC32 checksum + SHA-256)": _per_call_seconds(ours, fast_rounds),
        f"Django PBKDF2-SHA256, {pbkdf2.iterations} iterations": _per_call_seconds(django_pbkdf2, pbkdf2_rounds),
        "SHA-512 digest + constant-time compare": _per_call_seconds(sha512, fast_rounds),
    }
    ours_cost = next(iter(costs.values()))
    return {
        "seconds_per_check": costs,
        "pbkdf2_over_ours": costs[f"Django PBKDF2-SHA256, {pbkdf2.iterations} iterations"] / ours_cost,
    }
