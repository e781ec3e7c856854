"""Channels benchmark (issue 23): the outbox's sends per second per worker process, its CPU per send and the time
from an assistant's reply to the provider's request; and a channel's inbound webhook against api-message, in the
same run. Everything on 127.0.0.1, every phase bounded.

    .venv/bin/python -m bench.channels --sends 3000 --provider-ms 200 --e2e-rate 100 --e2e-seconds 5 --seconds 5

1. Throughput: ``--sends`` texts (one per person, so the per-person order never limits it) are in the outbox
   before one `manage.py worker --only channels` process starts, with a Twilio on 127.0.0.1 (a process of its own,
   through the official library's HTTP client) answering after ``--provider-ms``. Sends/s from the provider's first
   to its last request; the worker's CPU over the same span, per send.
2. End to end: with the worker idle, a writer process records ``--e2e-rate`` assistant replies a second for
   ``--e2e-seconds`` (each through conversations.outbound, as every writer does); each text carries the time its
   reply was written, and the provider notes when its request came: p50/p99 of the difference.
3. Inbound: gunicorn (gunicorn.conf.py, two workers) and wrk, ``--seconds`` at ``--connections`` each: api-message
   with an API key, then Telegram's webhook (each update a new id from a linked chat, so each records a message),
   then Twilio's inbound webhook (each SMS a new MessageSid from a linked number, signed in advance with the official
   library's RequestValidator); requests per second and each webhook's ratio to api-message (target >= 0.8).
   ``--rounds`` repeats the three in turn (api, Telegram, Twilio, api, ...): on a machine whose load drifts, each
   figure is then the total of its rounds, and every round's own ratios are kept beside it.

Needs PostgreSQL (BENCH_DATABASE_URL's server; its database is created and dropped) and wrk for phase 3.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import ROOT, cpu_seconds, manage, run_python, scratch_database, service_environment, stand_in, tree
from bench.server import Server

ACCOUNT_SID = "AC" + "b" * 32
AUTH_TOKEN = "bench-auth-token"
TELEGRAM_TOKEN = "123456:bench-token"
TELEGRAM_SECRET = "bench-telegram-secret"

# Twilio's Messages API, answering after a delay; each request's arrival time, recipient and text go to a log file.
PROVIDER = """
import json, sys, threading, time, secrets
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs
delay, log = float(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The answer's headers and body are two writes: with Nagle's algorithm on, the body waited for the client's
    # delayed ACK of the headers, 40 ms on Linux, added to every send (a real provider's server does not do that).
    disable_nagle_algorithm = True
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        arrived = time.time()
        form = parse_qs(body.decode())
        with lock:
            log.write(json.dumps([arrived, form.get("To", [""])[0], form.get("Body", [""])[0]]) + "\\n")
        time.sleep(delay)
        answer = json.dumps({"sid": "SM" + secrets.token_hex(16), "status": "queued"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
    def log_message(self, *a):
        pass
"""

SEED = """
import json
from django.contrib.auth import get_user_model
from django.db import transaction
from channels.models import LinkedAddress
from conversations import outbound
from conversations.models import Conversation, Message, Role, Source
from keys.services import create_key
User = get_user_model()
people = %(people)d
users = User.objects.bulk_create([User(username=f"b{n}", email=f"b{n}@example.com") for n in range(people)])
Conversation.objects.bulk_create([Conversation(user=u) for u in users], ignore_conflicts=True)
LinkedAddress.objects.bulk_create(
    [LinkedAddress(user=u, channel="sms", address=f"+1415{n:07d}") for n, u in enumerate(users)])
# The inbound phase's sender: a person of their own, with an API key for the api-message side.
inbound = User.objects.create_user("inbound", "inbound@example.com")
LinkedAddress.objects.create(user=inbound, channel="telegram", address="777000")
LinkedAddress.objects.create(user=inbound, channel="sms", address="%(twilio_sender)s")
key = create_key(inbound, "bench")[1]
conversations = dict(Conversation.objects.values_list("user_id", "pk"))
for start in range(0, people, 500):
    with transaction.atomic():
        made = Message.objects.bulk_create([
            Message(conversation_id=conversations[u.pk], role=Role.ASSISTANT, source=Source.ASSISTANT, text=f"t {n}")
            for n, u in enumerate(users[start:start + 500], start)])
        outbound.written([m.pk for m in made])
print(json.dumps(key))
"""

WRITER = """
import json, time
from django.db import transaction
from conversations import outbound
from conversations.models import Conversation, Message, Role, Source
conversations = list(Conversation.objects.order_by("pk").values_list("pk", flat=True)[:%(people)d])
rate, seconds = %(rate)f, %(seconds)f
start, n = time.monotonic(), 0
while n < rate * seconds:
    due = start + n / rate
    if time.monotonic() < due:
        time.sleep(due - time.monotonic())
    with transaction.atomic():
        m = Message.objects.create(conversation_id=conversations[n %% len(conversations)], role=Role.ASSISTANT,
                                   source=Source.ASSISTANT, text=f"e2e {n} {time.time():.6f}")
        outbound.written([m.pk])
    n += 1
print(json.dumps(n))
"""

TELEGRAM_LUA = """
-- Telegram's webhook: one update a request, each with new ids, from the linked chat 777000. The ids start with
-- BENCH_ID_PREFIX, new for each run (LuaJIT's math.random starts from the same seed in every run).
local counter = 0
local prefix = os.getenv("BENCH_ID_PREFIX")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Telegram-Bot-Api-Secret-Token"] = os.getenv("BENCH_SECRET")
request = function()
  counter = counter + 1
  local id = prefix .. string.format("%07d", counter)
  local body = '{"update_id": ' .. id .. ', "message": {"message_id": ' .. id .. ', "from": {"id": 777000, ' ..
    '"is_bot": false, "first_name": "B"}, "chat": {"id": 777000, "type": "private", "first_name": "B"}, ' ..
    '"date": 1764000000, "text": "Remind me to stretch at 3pm"}}'
  return wrk.format(nil, nil, nil, body)
end
"""

TWILIO_LUA = """
-- Twilio's inbound webhook: one SMS a request, each signed in advance (a line of BENCH_TWILIO_FILE: the
-- X-Twilio-Signature, a tab, the form), from the linked number TWILIO_SENDER.
local signed = {}
for line in io.lines(os.getenv("BENCH_TWILIO_FILE")) do
  local signature, form = line:match("^([^\t]+)\t(.*)$")
  signed[#signed + 1] = {signature, form}
end
local counter = 0
request = function()
  counter = counter + 1
  local item = signed[(counter - 1) % #signed + 1]
  local headers = {["Content-Type"] = "application/x-www-form-urlencoded", ["X-Twilio-Signature"] = item[1]}
  return wrk.format("POST", nil, headers, item[2])
end
"""
TWILIO_SENDER = "+14159990000"
TWILIO_PATH = "/channels/twilio/inbound"
PUBLIC_BASE_URL = "https://assistant.example"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=3000, help="texts in the outbox for phase 1 (default 3000)")
    parser.add_argument("--provider-ms", type=float, default=200, help="the provider's answer time (default 200)")
    parser.add_argument("--concurrency", type=int, default=64, help="CHANNEL_CONCURRENCY (default 64)")
    parser.add_argument("--e2e-rate", type=float, default=100, help="replies a second in phase 2 (default 100)")
    parser.add_argument("--e2e-seconds", type=float, default=5, help="length of phase 2 (default 5)")
    parser.add_argument("--seconds", type=int, default=5, help="each wrk run of phase 3 (default 5)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections in phase 3 (default 32)")
    parser.add_argument("--rounds", type=int, default=1, help="phase 3's runs of each endpoint, in turn (default 1)")
    parser.add_argument("--sends-only", action="store_true", help="phase 1 only (bench/channels_ab.py runs it so)")
    parser.add_argument("--json", metavar="PATH", help="append the result as one JSON line to PATH")
    return parser.parse_args()


def database() -> AbstractContextManager[str]:
    return scratch_database("bench_channels")


def environment(database_url: str, provider_url: str, args: argparse.Namespace) -> dict[str, str]:
    return service_environment(
        database_url,
        {
            "INGEST_RATE_LIMIT": "1000000000/m",
            "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
            "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
            "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
            "TWILIO_SMS_FROM": "+15005550006",
            "TWILIO_API_BASE_URL": provider_url,
            "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
            "TELEGRAM_BOT_USERNAME": "bench_bot",
            "TELEGRAM_WEBHOOK_SECRET": TELEGRAM_SECRET,
            "TELEGRAM_API_BASE_URL": provider_url,
            "CHANNEL_CONCURRENCY": str(args.concurrency),
            "WEB_CONCURRENCY": "2",
        },
    )


def arrivals(log: Path) -> list[tuple[float, str]]:
    """(arrival time, text) of every request the provider noted."""
    return [(arrived, text) for arrived, _to, text in texts(log)]


def texts(log: Path) -> list[tuple[float, str, str]]:
    """(arrival time, recipient, text) of every request the provider noted."""
    return [tuple(json.loads(line)) for line in log.read_text().splitlines() if line]  # type: ignore[misc]


def wait_for(condition: Any, timeout: float) -> bool:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(0.1)
    return False


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


@contextmanager
def profiled(pid: int) -> Iterator[None]:
    """BENCH_PY_SPY=<path>: py-spy samples the worker meanwhile and writes the stacks of its threads that hold the GIL
    (what costs CPU) to <path>, collapsed, one line a stack (the figures of such a run are not the worker's own)."""
    path = os.environ.get("BENCH_PY_SPY")
    if not path:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    command = [spy, "record", "--nonblocking", "--gil", "--format", "raw", "--rate", "250", "--output", path]
    sampler = subprocess.Popen([*command, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        sampler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        sampler.wait(timeout=30)


def throughput(worker: subprocess.Popen[bytes], log: Path, sends: int, started: float) -> dict[str, float]:
    """``started``: when the worker's process was started (time.time()), for the seconds until its first send."""
    if not wait_for(lambda: log.stat().st_size > 0, 60):
        raise SystemExit("the worker sent nothing within 60 s")
    cpu_at_start = cpu_seconds(tree(worker.pid))
    with profiled(worker.pid):
        wait_for(lambda: len(arrivals(log)) >= sends, 120)
    cpu = cpu_seconds(tree(worker.pid)) - cpu_at_start
    seen = arrivals(log)
    first, last = seen[0][0], seen[-1][0]
    if os.environ.get("BENCH_TIMELINE"):
        buckets: dict[int, int] = {}
        for at, _ in seen:
            buckets[int(at - first)] = buckets.get(int(at - first), 0) + 1
        print("sends per second of the run:", [buckets.get(n, 0) for n in range(int(last - first) + 1)])
    return {
        "sends": len(seen),
        "sends_per_second": (len(seen) - 1) / (last - first),
        "cpu_ms_per_send": 1000 * cpu / len(seen),
        "seconds_to_first_send": first - started,
    }


def end_to_end(
    worker: subprocess.Popen[bytes], env: dict[str, str], log: Path, args: argparse.Namespace
) -> dict[str, float]:
    """The worker of phase 1, now idle and warm."""
    before = len(arrivals(log))
    cpu_before = cpu_seconds(tree(worker.pid))
    written = run_python(WRITER % {"people": 1000, "rate": args.e2e_rate, "seconds": args.e2e_seconds}, env)
    wait_for(lambda: len(arrivals(log)) >= before + written, 30)
    latencies = [
        (arrived - float(text.split()[2])) * 1000 for arrived, text in arrivals(log)[before:] if text.startswith("e2e ")
    ]
    return {
        "replies": written,
        "arrived": len(latencies),
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "cpu_ms_per_send": 1000 * (cpu_seconds(tree(worker.pid)) - cpu_before) / max(len(latencies), 1),
    }


def inbound(env: dict[str, str], key: str, args: argparse.Namespace) -> dict[str, Any] | None:
    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed (apt-get install -y wrk): phase 3 skipped")
        return None
    server = Server(env, [], Path(tempfile.gettempdir()) / "bench-channels-gunicorn.log")
    scratch = Path(tempfile.mkdtemp(prefix="bench-channels-"))
    try:
        server.wait_ready("/health/", timeout=120)  # a loaded machine starts gunicorn slowly
        body = scratch / "body.json"
        body.write_text(json.dumps({"message": "Remind me to stretch at 3pm"}))
        telegram, twilio = scratch / "telegram.lua", scratch / "twilio.lua"
        telegram.write_text(TELEGRAM_LUA)
        twilio.write_text(TWILIO_LUA)
        signed = scratch / "twilio-signed.txt"
        scenarios = [
            ("api_message", ROOT / "bench" / "post.lua", "/api/v1/inbound/api-message"),
            ("telegram_webhook", telegram, "/channels/telegram/webhook"),
            ("twilio_inbound", twilio, TWILIO_PATH),
        ]
        run_env = {
            **os.environ,
            "BENCH_BODY_FILE": str(body),
            "BENCH_AUTHORIZATION": f"Bearer {key}",
            "BENCH_SECRET": TELEGRAM_SECRET,
            "BENCH_TWILIO_FILE": str(signed),
        }
        totals = {name: {"requests": 0.0, "seconds": 0.0, "non_2xx": 0.0} for name, _, _ in scenarios}
        rounds = []
        for number in range(args.rounds):
            # More signed requests than wrk can send in the run: a repeated MessageSid would be a (cheaper) retry.
            forms = sign_twilio_forms(signed, 3000 * args.seconds, prefix=number)
            run_env["BENCH_ID_PREFIX"] = f"{int(time.time()) % 10**8}{number % 10}"  # 9 digits, then 7 of a counter
            this: dict[str, float] = {"load": os.getloadavg()[0]}
            for name, script, path in scenarios:
                command = [
                    wrk, "--threads", "1", "--connections", str(args.connections), "--duration", f"{args.seconds}s",
                    "--timeout", "5s", "--script", str(script), server.url + path,
                ]  # fmt: skip
                output = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=args.seconds + 30)
                run = parse_wrk(output.stdout)
                for figure in ("requests", "seconds", "non_2xx"):
                    totals[name][figure] += run[figure]
                this[f"{name}_rps"] = run["requests"] / run["seconds"]
                if name == "twilio_inbound" and run["requests"] > forms:
                    print(f"round {number}: {run['requests']:.0f} Twilio requests for {forms} signed forms")
            this["ratio"] = this["telegram_webhook_rps"] / this["api_message_rps"]
            this["twilio_ratio"] = this["twilio_inbound_rps"] / this["api_message_rps"]
            print(f"round {number}:", json.dumps(this), flush=True)
            rounds.append(this)
        rps = {name: total["requests"] / total["seconds"] for name, total in totals.items()}
        return {
            **{f"{name}_rps": value for name, value in rps.items()},
            **{f"{name}_non_2xx": total["non_2xx"] for name, total in totals.items()},
            "ratio": rps["telegram_webhook"] / rps["api_message"],
            "twilio_ratio": rps["twilio_inbound"] / rps["api_message"],
            "rounds": rounds,
        }
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def sign_twilio_forms(path: Path, count: int, prefix: int) -> int:
    """``count`` inbound SMS forms as Twilio posts them, each with a new MessageSid and its X-Twilio-Signature
    (computed by the official library against PUBLIC_BASE_URL + the path), one per line of ``path``."""
    from urllib.parse import urlencode

    from twilio.request_validator import RequestValidator

    validator = RequestValidator(AUTH_TOKEN)
    url = PUBLIC_BASE_URL + TWILIO_PATH
    started = int(time.time())
    with path.open("w") as out:
        for n in range(count):
            sid = f"SM{started:012x}{prefix:04x}{n:016x}"
            form = {
                "ToCountry": "US", "SmsMessageSid": sid, "NumMedia": "0", "SmsSid": sid, "SmsStatus": "received",
                "Body": "Remind me to stretch at 3pm", "To": "+15005550006", "NumSegments": "1",
                "From": TWILIO_SENDER, "ApiVersion": "2010-04-01", "AccountSid": ACCOUNT_SID, "MessageSid": sid,
            }  # fmt: skip
            out.write(f"{validator.compute_signature(url, form)}\t{urlencode(form)}\n")
    return count


def parse_wrk(stdout: str) -> dict[str, float]:
    """Requests, seconds and non-2xx answers: from post.lua's summary line, else (the webhook scripts) wrk's own."""
    for line in stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            result = json.loads(line.removeprefix("BENCH_RESULT "))
            seconds = result["duration_us"] / 1e6
            return {"requests": result["requests"], "seconds": seconds, "non_2xx": result["non_2xx"]}
    # "  3021 requests in 5.00s, 1.02MB read"
    done = next(line.split() for line in stdout.splitlines() if " requests in " in line)
    duration = done[3].rstrip(",")
    scale = 60.0 if duration.endswith("m") else 0.001 if duration.endswith("ms") else 1.0
    requests, seconds = float(done[0]), float(duration.rstrip("ms")) * scale
    non_2xx = next((int(line.split()[-1]) for line in stdout.splitlines() if "Non-2xx" in line), 0)
    return {"requests": requests, "seconds": seconds, "non_2xx": non_2xx}


def worker_command() -> list[str]:
    """The channel worker of this checkout: the one worker's channels kind, or (a checkout from before it, compared
    side by side by bench/channels_ab.py) its own command."""
    if (ROOT / "delivery" / "management" / "commands" / "worker.py").exists():
        return ["manage.py", "worker", "--only", "channels", "--no-reload"]
    return ["manage.py", "sendchannels"]


def main() -> None:
    args = arguments()
    log = Path(tempfile.mkstemp(prefix="bench-channels-", suffix=".log")[1])
    provider, provider_port = stand_in(PROVIDER, str(args.provider_ms / 1000), str(log))
    try:
        provider_url = f"http://127.0.0.1:{provider_port}"
        with database() as database_url:
            env = environment(database_url, provider_url, args)
            manage(["migrate", "--no-input", "-v", "0"], env)
            key = run_python(SEED % {"people": args.sends, "twilio_sender": TWILIO_SENDER}, env)
            # A deployment that has run a while has statistics on its outbox; a table filled a moment ago has none
            # until autovacuum's next round (up to a minute), and the planner then reads the whole outbox for each
            # row it claims (docs/benchmarks.md, "Channels").
            with psycopg.connect(database_url, autocommit=True) as connection:
                connection.execute("ANALYZE")
            result: dict[str, Any] = {"provider_ms": args.provider_ms, "concurrency": args.concurrency}
            started = time.time()
            worker = subprocess.Popen([sys.executable, *worker_command()], cwd=ROOT, env=env)
            try:
                result["outbound"] = throughput(worker, log, args.sends, started)
                print("outbound:", json.dumps(result["outbound"]), flush=True)
                if not args.sends_only:
                    result["end_to_end"] = end_to_end(worker, env, log, args)
                    print("end to end:", json.dumps(result["end_to_end"]), flush=True)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
            if not args.sends_only:
                result["inbound"] = inbound(env, key, args)
                print("inbound:", json.dumps(result["inbound"]), flush=True)
    finally:
        provider.terminate()
        provider.wait(timeout=10)
        log.unlink(missing_ok=True)
    if args.json:
        with open(args.json, "a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
