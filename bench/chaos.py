"""The chaos run: thousands of messages sent with Idempotency-Keys while the web workers (gunicorn) and the workers
(`manage.py worker`, the Procfile's: deliveries and channel sends) are killed with SIGKILL or stopped with SIGTERM
and started again and the database goes away and comes back; every person has a linked phone number, so every reply
is also texted through a Twilio stand-in (tests/providers.py). Then it counts what was lost, duplicated or left
stuck, messages and texts. Everything on 127.0.0.1, bounded in time and count.

    .venv/bin/python -m bench.chaos --messages 3000 --rate 25          # prints the counts; exit 1 if one is not 0
    .venv/bin/python -m bench.chaos --messages 3000 --rate 25 --docs   # and writes them to docs/chaos.md

What runs: a database of its own on BENCH_DATABASE_URL's PostgreSQL server (created, dropped afterwards), reached by
gunicorn and the workers through a TCP proxy that the run cuts (the shared server itself is never stopped:
tests/live_stack.py's CuttableProxy); gunicorn with the project's gunicorn.conf.py (as the Procfile runs it); the
workers; an assistant runtime on 127.0.0.1 answering at once (the webhook backend). REDIS_URL is not used: each
process keeps its own limits, which the run raises out of the way.

Each message has its own Idempotency-Key; a request that gets anything but 200 (a 503 while the database is away, a
409 while its first try is still running, a dropped connection when its worker was killed) is sent again with the
same key until it is answered or the sending time is over. The counts, read from the database once the workers have
settled:

- lost: messages answered 200 that are not in the thread;
- duplicated: a message recorded more than once, or one key answered with two different ids;
- stuck: deliveries still queued or being attempted once the workers had SETTLE seconds to finish;
- half-written: messages without their delivery;
- unanswered: messages never answered 200 before the sending time ran out (not a loss: the caller knows);
- texts lost: replies whose text never reached the phone (or was failed); texts stuck: still queued or being sent;
- texts twice: a reply's text that reached the provider more than once. Explained when its outbox row was taken over
  (a worker killed with SIGKILL mid-send: the request had reached the provider, the answer never got recorded);
  unexplained otherwise (a SIGTERM never sends twice), and that fails the run.

The database's "restart" is a TCP proxy that drops every connection and refuses new ones for 1 to 3 s: the shared
PostgreSQL server is never stopped (other databases live on it); a cut looks the same to the service's processes.
CI runs a short version on PostgreSQL (.ci/run).
"""

import argparse
import http.client
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import harness
from tests.live_stack import CuttableProxy
from tests.providers import TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_SMS_FROM, FakeTwilio

DOCS = harness.ROOT / "docs" / "chaos.md"
CURRENT = "/api/v1/inbound/api-message"
WEBHOOK_SECRET = "whsec_" + "YmVuY2htYXJrLXJ1bnRpbWUtc2hhcmVkLXNlY3JldC0zMmI="

# The runtime counts what it is sent: every attempt, and the distinct messages (webhook-id is the message's id).
RUNTIME = """
import json, threading
seen, lock = {}, threading.Lock()
class H(Handler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        webhook_id = self.headers.get("webhook-id", "")
        with lock:
            seen[webhook_id] = seen.get(webhook_id, 0) + 1
        self.answer(200, json.dumps({"reply": "done " + webhook_id}).encode())  # each reply's text its own
    def do_GET(self):
        with lock:
            stats = {"attempts": sum(seen.values()), "messages": len(seen)}
        self.answer(200, json.dumps(stats).encode())
"""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000, help="messages to send (default 3000)")
    parser.add_argument("--senders", type=int, default=8, help="concurrent senders (default 8)")
    parser.add_argument("--rate", type=float, default=25, help="new messages per second at most (default 25)")
    parser.add_argument("--users", type=int, default=20, help="people (keys, threads) the messages spread over")
    parser.add_argument("--seconds", type=float, default=150, help="sending time at most (default 150)")
    parser.add_argument("--settle", type=float, default=90, help="seconds the workers get to finish afterwards")
    parser.add_argument("--every", type=float, default=4, help="seconds between two blows (default 4)")
    parser.add_argument("--web-processes", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--channel-concurrency", type=int, default=64, help="sends in flight per worker (default 64)")
    parser.add_argument("--provider-ms", type=float, default=200, help="the Twilio stand-in's answer ms (default 200)")
    parser.add_argument("--seed", type=int, default=None, help="the blows' random order (default: a new one)")
    parser.add_argument(
        "--channel-kills",
        type=int,
        default=0,
        metavar="N",
        help="instead of the mixed blows: the channel worker runs in a process of its own, and the only blows are N "
        "SIGKILLs of it, evenly spread over the sending time (the other worker and gunicorn are left alone)",
    )
    parser.add_argument(
        "--kill-at",
        type=int,
        default=1,
        metavar="N",
        help="with --channel-kills: each blow waits (up to 30 s past its moment) until the provider holds N of the "
        "worker's sends or more (default 1; with --provider-ms long enough to keep the worker busy, its concurrency)",
    )
    parser.add_argument(
        "--checkout",
        type=Path,
        default=harness.ROOT,
        help="the version whose processes run (default: this one; another version: bench/ copied into it)",
    )
    parser.add_argument("--docs", action="store_true", help=f"write the result to {DOCS.relative_to(harness.ROOT)}")
    return parser.parse_args()


# --- the processes ------------------------------------------------------------------------------------------------


def through(proxy: CuttableProxy, database_url: str) -> str:
    parts = urlsplit(database_url)
    credentials, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{proxy.port}"))


def environment(database_url: str, runtime_url: str, twilio_url: str, args: argparse.Namespace) -> dict[str, str]:
    return harness.service_environment(
        database_url,
        {
            "REDIS_URL": "",
            "INGEST_RATE_LIMIT": "1000000/h",
            "AUTH_FAILURE_RATE_LIMIT": "1000000/h",
            "LOG_LEVEL": os.environ.get("CHAOS_LOG_LEVEL", "ERROR"),
            "ASSISTANT_BACKEND": "webhook",
            "ASSISTANT_WEBHOOK_URL": runtime_url,
            "ASSISTANT_WEBHOOK_SECRET": WEBHOOK_SECRET,
            # Short waits, so that the run settles within minutes: a killed worker's deliveries are taken over after
            # a 6 s lease, a failed attempt is retried after 1 to 5 s, and the kills themselves do not use up a
            # delivery's attempts or takeovers (they are not the message's fault).
            "DELIVERY_LEASE_SECONDS": "6",
            "DELIVERY_MAX_TAKEOVERS": "50",
            "ASSISTANT_RETRY_BASE_SECONDS": "1",
            "ASSISTANT_RETRY_MAX_SECONDS": "5",
            "ASSISTANT_MAX_ATTEMPTS": "50",
            "DELIVERY_GRACE_SECONDS": "2",
            "WEB_CONCURRENCY": str(args.web_processes),
            # Every person's phone, on the Twilio stand-in; the same short waits for the texts.
            "PUBLIC_BASE_URL": "https://assistant.example",
            "TWILIO_ACCOUNT_SID": TWILIO_ACCOUNT_SID,
            "TWILIO_AUTH_TOKEN": TWILIO_AUTH_TOKEN,
            "TWILIO_SMS_FROM": TWILIO_SMS_FROM,
            "TWILIO_API_BASE_URL": twilio_url,
            "CHANNEL_CONCURRENCY": str(args.channel_concurrency),
            "CHANNEL_LEASE_SECONDS": "6",
            "CHANNEL_MAX_TAKEOVERS": "50",
            "CHANNEL_MAX_ATTEMPTS": "50",
            "CHANNEL_RETRY_BASE_SECONDS": "1",
            "CHANNEL_RETRY_MAX_SECONDS": "5",
            "CHANNEL_GRACE_SECONDS": "2",
        },
    )


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def worker_commands(checkout: Path, channels_apart: bool) -> tuple[list[str], list[str] | None]:
    """The worker's command and, with ``channels_apart``, the channel worker's own: the one worker's selections, or
    (a checkout from before the one worker) its two commands."""
    if (checkout / "delivery" / "management" / "commands" / "worker.py").exists():
        if not channels_apart:
            return ["manage.py", "worker", "--no-reload"], None
        others = ["manage.py", "worker", "--only", "deliveries,tasks,housekeeping", "--no-reload"]
        return others, ["manage.py", "worker", "--only", "channels", "--no-reload"]
    return ["manage.py", "db_worker", "--no-reload"], ["manage.py", "sendchannels"]


@dataclass
class Stack:
    """gunicorn (one master, its workers) and the worker processes, each killable and replaceable; with
    ``channel_command``, a channel worker of its own too."""

    env: dict[str, str]
    port: int
    worker_count: int
    worker_command: list[str] = field(default_factory=lambda: ["manage.py", "worker", "--no-reload"])
    channel_command: list[str] | None = None
    web: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    channel_worker: subprocess.Popen[bytes] | None = None
    blows: Counter[str] = field(default_factory=Counter)

    def start_web(self) -> None:
        self.web = harness.start_gunicorn(self.env, self.port)

    def start_workers(self) -> None:
        """Top the workers up to their number, replacing any that exited (as a platform restarts a dead process)."""
        self.workers = [worker for worker in self.workers if worker.poll() is None]
        while len(self.workers) < self.worker_count:
            self.workers.append(harness.start(self.worker_command, self.env))
        if self.channel_command and (self.channel_worker is None or self.channel_worker.poll() is not None):
            self.channel_worker = harness.start(self.channel_command, self.env)

    def kill_the_channel_worker(self) -> None:
        """SIGKILL the channel worker with its sends in flight, and start another."""
        assert self.channel_worker is not None
        kill_group(self.channel_worker)
        self.channel_worker = None
        self.start_workers()
        self.blows["channel worker killed (SIGKILL) and restarted"] += 1

    def kill_a_web_worker(self) -> None:
        """SIGKILL one of gunicorn's workers mid-request; the master starts another."""
        assert self.web is not None
        children = harness.tree(self.web.pid)[1:]
        if children:
            with suppress(ProcessLookupError):
                os.kill(random.choice(children), signal.SIGKILL)
            self.blows["gunicorn worker killed"] += 1

    def kill_the_web_server(self) -> None:
        """SIGKILL gunicorn whole (master and workers), then start it again on the same port."""
        assert self.web is not None
        kill_group(self.web)
        self.start_web()
        self.blows["gunicorn killed and restarted"] += 1

    def kill_a_worker(self) -> None:
        """SIGKILL one worker mid-attempt and mid-send, and start another."""
        victim = self.workers.pop(random.randrange(len(self.workers)))
        kill_group(victim)
        self.start_workers()
        self.blows["worker killed (SIGKILL) and restarted"] += 1

    def stop_a_worker(self) -> None:
        """SIGTERM one worker (a deploy, a scale-down): it finishes or puts back what it holds; then another starts."""
        victim = self.workers.pop(random.randrange(len(self.workers)))
        with suppress(ProcessLookupError):
            victim.send_signal(signal.SIGTERM)
        try:
            victim.wait(timeout=15)
        except subprocess.TimeoutExpired:
            kill_group(victim)
            self.blows["worker not stopped 15 s after SIGTERM"] += 1
        self.start_workers()
        self.blows["worker stopped (SIGTERM) and restarted"] += 1

    def stop(self) -> None:
        for process in [*self.workers, *([self.web] if self.web else []), *filter(None, [self.channel_worker])]:
            kill_group(process)


def cut_the_database(proxy: CuttableProxy, stack: Stack) -> None:
    """Every connection to PostgreSQL dropped and new ones refused for 1 to 3 s (the database restarting)."""
    proxy.cut()
    time.sleep(random.uniform(1, 3))
    proxy.restore()
    stack.blows["database cut off (1-3 s)"] += 1


# --- the traffic --------------------------------------------------------------------------------------------------


@dataclass
class Ledger:
    """What the senders were told, per message number."""

    answered: dict[int, set[str]] = field(default_factory=dict)  # the ids answered with 200 (one, if all is well)
    unanswered: set[int] = field(default_factory=set)
    refused: Counter[str] = field(default_factory=Counter)  # statuses answered before a retry, and connection errors
    replays: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def send_all(port: int, keys: list[str], run: str, args: argparse.Namespace, ledger: Ledger) -> None:
    numbers = iter(range(args.messages))
    take = threading.Lock()
    began = time.monotonic()
    deadline = began + args.seconds

    def sender() -> None:
        connection: http.client.HTTPConnection | None = None
        while True:
            with take:
                number = next(numbers, None)
            if number is None:
                return
            pause = began + number / args.rate - time.monotonic()  # a steady arrival rate, so the blows fall on traffic
            if pause > 0:
                time.sleep(pause)
            body = json.dumps({"message": f"chaos {run} #{number}"}).encode()
            headers = {
                "Authorization": f"Bearer {keys[number % len(keys)]}",
                "Content-Type": "application/json",
                "Idempotency-Key": f"chaos-{run}-{number}",
            }
            while True:
                if time.monotonic() > deadline:
                    with ledger.lock:
                        ledger.unanswered.add(number)
                    break
                try:
                    if connection is None:
                        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
                    connection.request("POST", CURRENT, body=body, headers=headers)
                    response = connection.getresponse()
                    answer = response.read()
                    status = response.status
                except (OSError, http.client.HTTPException) as error:
                    if connection is not None:
                        connection.close()
                    connection = None
                    with ledger.lock:
                        ledger.refused[type(error).__name__] += 1
                    time.sleep(0.2)
                    continue
                if status == 200:
                    with ledger.lock:
                        ledger.answered.setdefault(number, set()).add(json.loads(answer)["id"])
                        ledger.replays += response.getheader("Idempotent-Replayed") == "true"
                    break
                with ledger.lock:
                    ledger.refused[str(status)] += 1
                if status not in (409, 429, 500, 502, 503, 504):
                    with ledger.lock:
                        ledger.unanswered.add(number)  # a refusal a retry cannot change: counted, not retried
                    break
                time.sleep(min(float(response.getheader("Retry-After") or 1), 1.0) * random.uniform(0.2, 1))

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(args.senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# --- the counts ---------------------------------------------------------------------------------------------------


PENDING_TEXTS = "SELECT count(*) FROM channels_outboundmessage WHERE status IN ('queued', 'processing')"


def settle(database_url: str, seconds: float) -> float:
    """Wait (at most ``seconds``) until no delivery is queued or being attempted and no text is waiting to be sent;
    how long it took."""
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as db:
        harness.wait_settled(db, seconds, poll=1)
        while time.monotonic() - started < seconds and (db.execute(PENDING_TEXTS).fetchone() or [0])[0]:
            time.sleep(1)
    return time.monotonic() - started


def count_texts(database_url: str, twilio: FakeTwilio) -> dict[str, int]:
    """The replies' texts against what reached the Twilio stand-in (each reply's text is its own: "done <id>")."""
    with psycopg.connect(database_url, autocommit=True) as db:
        rows = db.execute("SELECT text, status, takeovers FROM channels_outboundmessage").fetchall()
        replies = db.execute(
            "SELECT count(*) FROM conversations_message WHERE role = 'assistant' AND text LIKE 'done %%'"
        ).fetchone()
    with twilio.lock:
        reached = Counter(message.text for message in twilio.sent)
    got = set(reached)
    taken_over = {text for text, _, takeovers in rows if takeovers > 0}
    replies_count = replies[0] if replies else 0
    twice = {text: times for text, times in reached.items() if times > 1}
    return {
        "replies": replies_count,
        "texts queued for phones": len(rows),
        "texts reached the provider": len(reached),
        # failed, or "sent" without reaching the provider, or a reply that never got its outbox row
        "texts lost": sum(1 for text, status, _ in rows if status == "failed" or (status == "sent" and text not in got))
        + max(replies_count - len(rows), 0),
        "texts stuck": sum(1 for _, status, _ in rows if status in ("queued", "processing")),
        "texts twice, explained by a kill -9 mid-send": sum(n - 1 for text, n in twice.items() if text in taken_over),
        "texts twice, unexplained": sum(n - 1 for text, n in twice.items() if text not in taken_over),
        "texts taken over": len(taken_over),
    }


def count(database_url: str, run: str, ledger: Ledger) -> dict[str, Any]:
    with psycopg.connect(database_url, autocommit=True) as db:
        texts = Counter(
            text
            for (text,) in db.execute(
                "SELECT text FROM conversations_message WHERE role = 'user' AND text LIKE %s", [f"chaos {run} #%"]
            )
        )
        ids = {row[0] for row in db.execute("SELECT public_id FROM conversations_message WHERE role = 'user'")}
        statuses: dict[str, int] = dict(
            db.execute("SELECT status, count(*) FROM conversations_delivery GROUP BY status").fetchall()
        )
        half = db.execute(
            "SELECT count(*) FROM conversations_message m WHERE m.role = 'user' AND NOT EXISTS "
            "(SELECT 1 FROM conversations_delivery d WHERE d.message_id = m.id)"
        ).fetchone()
    lost = [n for n, answered in ledger.answered.items() if not answered & ids]
    two_ids = [n for n, answered in ledger.answered.items() if len(answered) > 1]
    return {
        "sent": len(ledger.answered) + len(ledger.unanswered),
        "answered 200": len(ledger.answered),
        "of which replays": ledger.replays,
        "unanswered": len(ledger.unanswered),
        "recorded": sum(texts.values()),
        "lost": len(lost),
        "duplicated": sum(times - 1 for times in texts.values()) + len(two_ids),
        "stuck": statuses.get("queued", 0) + statuses.get("processing", 0),
        "half-written": half[0] if half else 0,
        "delivered": statuses.get("delivered", 0),
        "failed": statuses.get("failed", 0),
    }


def runtime_stats(url: str) -> dict[str, int]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=5)
    connection.request("GET", "/stats")
    return dict(json.loads(connection.getresponse().read()))


# --- the run ------------------------------------------------------------------------------------------------------


LINK_PHONES = """
import json
from django.contrib.auth import get_user_model
from channels.models import LinkedAddress
people = get_user_model().objects.filter(username__startswith="chaos").order_by("id")
for n, person in enumerate(people):
    LinkedAddress.objects.create(user=person, channel="sms", address=f"+1415555{n:04d}")
print(json.dumps(len(people)))
"""


def main() -> int:
    args = arguments()
    harness.use_checkout(args.checkout)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    random.seed(seed)
    run = secrets.token_hex(3)
    # A worker killed mid-attempt drops its connection: expected here, so the runtime keeps quiet about it.
    runtime, runtime_port = harness.stand_in(RUNTIME, quiet_errors=True)
    runtime_url = f"http://127.0.0.1:{runtime_port}/hooks/assistant"
    server = urlsplit(harness.SERVER_URL)
    proxy = CuttableProxy(server.hostname or "127.0.0.1", server.port or 5432)
    stack: Stack | None = None
    started_at = datetime.now(UTC)
    twilio = FakeTwilio()
    twilio.delay = args.provider_ms / 1000
    threading.Thread(target=twilio.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with harness.scratch_database("chaos") as database_url:
            direct = environment(database_url, runtime_url, twilio.url, args)
            harness.migrate(direct)
            keys = harness.people_with_keys(direct, args.users, "chaos")
            harness.run_python(LINK_PHONES, direct)
            env = environment(through(proxy, database_url), runtime_url, twilio.url, args)
            worker, channel_worker = worker_commands(args.checkout, channels_apart=args.channel_kills > 0)
            stack = Stack(env, harness.free_port(), args.workers, worker, channel_worker)
            stack.start_web()
            stack.start_workers()
            harness.wait_until_up(stack.port)
            ledger = Ledger()
            sending = threading.Thread(target=send_all, args=(stack.port, keys, run, args, ledger), daemon=True)
            began = time.monotonic()
            sending.start()
            # Restarting gunicorn whole is the rarest blow: its new workers take seconds to answer their first
            # request on a busy machine, and a run of such restarts would leave nothing to hit but refusals.
            blows = [
                stack.kill_a_web_worker,
                stack.kill_a_worker,
                stack.stop_a_worker,
                lambda: cut_the_database(proxy, stack),
                stack.kill_the_web_server,
            ]
            in_flight: list[tuple[int, int]] = []
            if args.channel_kills:
                in_flight = channel_kills(stack, sending, began, twilio, database_url, args)
            while sending.is_alive():
                sending.join(args.every)
                if sending.is_alive() and not args.channel_kills:
                    random.choices(blows, weights=[3, 3, 2, 3, 1])[0]()
                    stack.start_workers()
            sending_seconds = time.monotonic() - began
            proxy.restore()
            stack.start_workers()
            settled_in = settle(database_url, args.settle)
            result = count(database_url, run, ledger)
            result["runtime attempts"], result["runtime messages"] = runtime_stats(runtime_url).values()
            result |= count_texts(database_url, twilio)
    finally:
        if stack is not None:
            stack.stop()
        twilio.shutdown()
        twilio.server_close()
        proxy.close()
        runtime.kill()
        runtime.wait()
    report = {
        "when": started_at.strftime("%Y-%m-%d %H:%M UTC"),
        "seed": seed,
        "messages": args.messages,
        "sending seconds": round(sending_seconds, 1),
        "settled in seconds": round(settled_in, 1),
        "blows": dict(stack.blows),
        "refusals retried": dict(ledger.refused),
        "counts": result,
    }
    if args.channel_kills:
        report["checkout"] = _commit(args.checkout)
        report["sends at the provider at each kill"] = [twilio_count for twilio_count, _ in in_flight]
        report["texts held by the channel worker at each kill"] = [held for _, held in in_flight]
    print(json.dumps(report, indent=2))
    if args.docs:
        write_docs(report, args)
    bad = result["lost"] + result["duplicated"] + result["stuck"] + result["half-written"]
    bad += result["texts lost"] + result["texts stuck"] + result["texts twice, unexplained"]
    return 1 if bad else 0


def channel_kills(
    stack: Stack,
    sending: threading.Thread,
    began: float,
    twilio: FakeTwilio,
    database_url: str,
    args: argparse.Namespace,
) -> list[tuple[int, int]]:
    """``--channel-kills`` SIGKILLs of the channel worker, evenly spread over the expected sending time, each as soon
    after its moment as the provider holds ``--kill-at`` of the worker's sends or more (a worker still starting has
    none: a blow then would cut nothing); for each, the sends the provider had received and not yet answered (each one a
    text sent twice once its row is taken over) and the texts the worker held (claimed, being sent or claimed ahead)
    just before it."""
    expected = args.messages / args.rate
    in_flight = []
    with psycopg.connect(database_url, autocommit=True) as db:
        for number in range(1, args.channel_kills + 1):
            sending.join(max(began + number * expected / (args.channel_kills + 1) - time.monotonic(), 0))
            at_the_provider, waited_until = 0, time.monotonic() + 30
            while time.monotonic() < waited_until:
                with twilio.lock:
                    at_the_provider = len(twilio.requests) - len(twilio.sent)
                if at_the_provider >= args.kill_at:
                    break
                time.sleep(0.005)
            held = db.execute("SELECT count(*) FROM channels_outboundmessage WHERE status = 'processing'").fetchone()
            stack.kill_the_channel_worker()
            in_flight.append((at_the_provider, held[0] if held else 0))
    return in_flight


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


def write_docs(report: dict[str, Any], args: argparse.Namespace) -> None:
    counts = report["counts"]
    lines = [
        "# The chaos run",
        "",
        "`bench/chaos.py` (see its docstring): messages sent with Idempotency-Keys while gunicorn's workers, gunicorn",
        "whole and the `worker` processes are killed with SIGKILL (or stopped with SIGTERM) and started again and the",
        "database is cut off (a TCP proxy dropped and restored); refused requests are retried with their key; every",
        "person has a linked phone number on a Twilio stand-in, so every reply is texted too. Run it with",
        f"`.venv/bin/python -m bench.chaos --messages {args.messages} --rate {args.rate:g} --senders {args.senders} "
        f"--seconds {args.seconds:g} --docs`.",
        "",
        f"## Last result ({report['when']}, seed {report['seed']})",
        "",
        f"**lost {counts['lost']} · duplicated {counts['duplicated']} · stuck {counts['stuck']} · half-written "
        f"{counts['half-written']} · texts lost {counts['texts lost']} · texts stuck {counts['texts stuck']} · "
        f"texts twice unexplained {counts['texts twice, unexplained']}**",
        "",
        "| | |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in counts.items()),
        f"| sending took (s) | {report['sending seconds']} |",
        f"| settled after (s) | {report['settled in seconds']} |",
        "",
        "Blows: " + ", ".join(f"{name} × {times}" for name, times in report["blows"].items()) + ".",
        "",
        "Refusals the senders retried (status or error, times): "
        + (", ".join(f"{name} × {times}" for name, times in report["refusals retried"].items()) or "none")
        + ".",
        "",
        "The runtime is sent a message more than once when a worker was killed mid-attempt (at least once, by",
        "design; the `webhook-id` lets it drop the repeat): `runtime attempts` against `runtime messages`. A text",
        "reaches the phone twice only when its worker was killed with SIGKILL after the provider took it and before",
        "the answer was recorded: its row was then taken over (`texts twice, explained by a kill -9 mid-send`).",
        "How many, when the channel worker alone is killed with its sends in flight (`--channel-kills`), before and",
        "after the one worker: [benchmarks](benchmarks.md#texts-sent-twice-when-the-channel-worker-is-killed).",
        "",
    ]
    DOCS.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
