"""How long a person waits on an approval answered by SMS: gunicorn and one `manage.py worker` as production runs
them, a Twilio on 127.0.0.1 (a process of its own) that notes when each text reaches it, and for each of ``--people``
people in turn:

1. a script's message with the person's key (its tools need approval), "Remind me to renew the domain tomorrow at
   3pm": the time until the approval request reaches the provider (the delivery, the assistant asking, the outbox);
2. the person's "YES K7QZ4MX2", posted to the Twilio webhook signed as Twilio signs it: the time until "Approved: ..."
   reaches the provider (the answer recorded, the confirmation through the outbox);
3. from the same "YES", the time until the assistant's next text reaches the provider (the approved tool run, the
   assistant's reply through the outbox).

    .venv/bin/python -m bench.approval_latency --people 20
    .venv/bin/python -m bench.approval_latency --people 20 --task-interval 1     # django-tasks-db's default poll

Every wait is bounded (--timeout seconds); needs PostgreSQL (BENCH_DATABASE_URL's server; a scratch database).
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench.channels import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    PROVIDER,
    PUBLIC_BASE_URL,
    TWILIO_PATH,
    environment,
    percentile,
    texts,
)
from bench.harness import ROOT, manage, run_python, scratch_database, stand_in
from bench.server import Server

SEED = """
import json
from django.contrib.auth import get_user_model
from django.utils import timezone
from accounts.services import profile_of
from channels.models import LinkedAddress
from keys.services import create_key
people = []
for n in range(%(people)d):
    person = get_user_model().objects.create_user(f"a{n}", f"a{n}@example.com")
    profile = profile_of(person)
    profile.channel = "sms"
    profile.save()
    number = f"+1415777{n:04d}"
    LinkedAddress.objects.create(user=person, channel="sms", address=number, last_inbound_at=timezone.now())
    people.append([number, create_key(person, "nightly backup", tools_need_approval=True)[1]])
print(json.dumps(people))
"""

ASK = "Remind me to renew the domain tomorrow at 3pm"
CODE = re.compile(r"Reply YES ([A-Z0-9]{8}) to approve")
SMS_FROM = "+15005550006"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=20, help="approvals, one person after another (default 20)")
    parser.add_argument("--timeout", type=float, default=60, help="the longest wait for one text (default 60)")
    parser.add_argument(
        "--task-interval", type=float, help="the worker's task loop poll (--interval; default: the worker's own)"
    )
    parser.add_argument("--json", metavar="PATH", help="append the result as one JSON line to PATH")
    return parser.parse_args()


def first_text(log: Path, to: str, after: float, wanted: Any, timeout: float) -> tuple[float, str]:
    """The first text to ``to`` that reached the provider after ``after`` and that ``wanted`` accepts."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        for arrived, recipient, text in texts(log):
            if recipient == to and arrived >= after and wanted(text):
                return arrived, text
        time.sleep(0.01)
    raise SystemExit(f"no such text to {to} within {timeout} s")


def post(url: str, data: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(answer.status)


def yes_by_sms(server_url: str, number: str, code: str, n: int) -> None:
    """The person's answer, as Twilio posts an inbound SMS (signed by the official library's RequestValidator)."""
    from twilio.request_validator import RequestValidator

    sid = f"SM{int(time.time()):012x}{n:020x}"
    form = {
        "ToCountry": "US", "SmsMessageSid": sid, "NumMedia": "0", "SmsSid": sid, "SmsStatus": "received",
        "Body": f"YES {code}", "To": SMS_FROM, "NumSegments": "1", "From": number, "ApiVersion": "2010-04-01",
        "AccountSid": ACCOUNT_SID, "MessageSid": sid,
    }  # fmt: skip
    signature = RequestValidator(AUTH_TOKEN).compute_signature(PUBLIC_BASE_URL + TWILIO_PATH, form)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature}
    post(server_url + TWILIO_PATH, urlencode(form).encode(), headers)


def one_approval(server_url: str, log: Path, number: str, key: str, n: int, timeout: float) -> dict[str, float]:
    sent = time.time()
    body = json.dumps({"message": ASK}).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    post(f"{server_url}/api/v1/inbound/api-message", body, headers)
    asked_at, request = first_text(log, number, sent, CODE.search, timeout)
    match = CODE.search(request)
    assert match is not None
    answered = time.time()
    yes_by_sms(server_url, number, match.group(1), n)
    confirmed_at, _ = first_text(log, number, answered, lambda text: text.startswith("Approved:"), timeout)
    replied_at, _ = first_text(log, number, answered, lambda text: not text.startswith("Approved:"), timeout)
    return {
        "request_ms": 1000 * (asked_at - sent),
        "confirmation_ms": 1000 * (confirmed_at - answered),
        "reply_ms": 1000 * (replied_at - answered),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p99": percentile(values, 0.99), "max": max(values)}


def main() -> None:
    args = arguments()
    log = Path(tempfile.mkstemp(prefix="bench-approvals-", suffix=".log")[1])
    provider, provider_port = stand_in(PROVIDER, "0", str(log))  # a Twilio answering at once
    try:
        with scratch_database("bench_approvals") as database_url:
            options = argparse.Namespace(concurrency=8)
            env = environment(database_url, f"http://127.0.0.1:{provider_port}", options)
            env["TWILIO_SMS_FROM"] = SMS_FROM
            manage(["migrate", "--no-input", "-v", "0"], env)
            people = run_python(SEED % {"people": args.people}, env)
            server = Server(env, [], Path(tempfile.gettempdir()) / "bench-approvals-gunicorn.log")
            command = [sys.executable, "manage.py", "worker", "--no-reload"]
            if args.task_interval is not None:
                command += ["--interval", str(args.task_interval)]
            worker = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
            try:
                server.wait_ready("/health/", timeout=120)
                rows = [
                    one_approval(server.url, log, number, key, n, args.timeout)
                    for n, (number, key) in enumerate(people)
                ]
            finally:
                worker.terminate()
                worker.wait(timeout=30)
                server.stop()
    finally:
        provider.terminate()
        provider.wait(timeout=10)
        log.unlink(missing_ok=True)
    result = {name: summary([row[name] for row in rows]) for name in ("request_ms", "confirmation_ms", "reply_ms")}
    result["people"] = len(rows)  # type: ignore[assignment]
    result["task_interval"] = args.task_interval  # type: ignore[assignment]
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
