"""Real mail and calendar servers on 127.0.0.1 for the tests: Radicale (CalDAV, in this process, over a threaded
WSGI server), Dovecot (IMAP, its own process, unprivileged, with a configuration file, a passwd-file and maildirs
in a temporary directory) and aiosmtpd (SMTP, with AUTH, keeping what it receives). Plus two that misbehave: one
that accepts and never answers, and a port where nothing listens."""

import contextlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from tests.ports import free_port

PASSWORD = "app-password-1"


def wait_for_port(port: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


# Radicale --------------------------------------------------------------------------------------------------------


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Radicale:
    url: str
    root: Path  # the collections on disk

    def calendar_dir(self, user: str, calendar: str) -> Path:
        return self.root / "collection-root" / user / calendar


@contextmanager
def radicale(directory: Path, users: dict[str, str]) -> Iterator[Radicale]:
    import radicale as radicale_package
    from radicale import config

    (directory / "users").write_text("".join(f"{user}:{password}\n" for user, password in users.items()))
    configuration = config.load()
    configuration.update(
        {
            "auth": {
                "type": "htpasswd",
                "htpasswd_filename": str(directory / "users"),
                "htpasswd_encryption": "plain",
                "delay": "0",
            },
            "storage": {"filesystem_folder": str(directory / "collections")},
            "rights": {"type": "owner_only"},
            "logging": {"level": "error", "mask_passwords": "True"},
        },
        "test",
        privileged=True,
    )
    logging.getLogger("radicale").setLevel(logging.WARNING)
    application = radicale_package.Application(configuration)
    server = make_server("127.0.0.1", 0, application, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="radicale", daemon=True)
    thread.start()
    try:
        yield Radicale(url=f"http://127.0.0.1:{server.server_address[1]}/", root=directory / "collections")
    finally:
        server.shutdown()
        server.server_close()


# Dovecot ---------------------------------------------------------------------------------------------------------

DOVECOT_CONF = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login{mechanisms}
default_internal_user = {user}
default_internal_group = {user}
default_login_user = {user}
mail_location = maildir:{root}/mail/%n
mail_uid = {uid}
mail_gid = {gid}
first_valid_uid = 0
first_valid_gid = 0
auth_failure_delay = 0
{oauth2_passdb}passdb {{
  driver = passwd-file
  mechanisms = plain login
  args = scheme=PLAIN username_format=%u {root}/users
}}
# %n: the part before any @, so "user3@example.com" (an OAuth log-in names an address) is the account user3
userdb {{
  driver = passwd-file
  args = username_format=%n {root}/users
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \\Drafts
    auto = create
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
  # no growing delay for an address after a failed log-in: the wrong-password tests would slow the next ones
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  chroot =
}}
"""


@dataclass
class Dovecot:
    host: str
    port: int
    root: Path
    owner: tuple[int, int]  # the uid and gid dovecot runs as
    handed_out: int = 0

    def own(self, path: Path) -> None:
        if os.getuid() != 0:
            return
        for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.chown(item, *self.owner)

    def next_user(self) -> str:
        """An account no test has used yet, so each test gets an empty mailbox. They are all written before the
        server starts: Dovecot notices a changed passwd-file by its modification time, which two changes in the
        same second do not change."""
        self.handed_out += 1
        return f"user{self.handed_out}"

    def maildir(self, user: str) -> Path:
        return self.root / "mail" / user

    def deliver(self, user: str, raw: bytes, *, seen: bool = False, name: str = "", received: str = "") -> None:
        """Put a message straight into the user's inbox (maildir), as a delivery agent would. ``received``
        ("2026-11-24 10:00", UTC) is its arrival time, IMAP's internal date: the file's modification time."""
        box = self.maildir(user)
        fresh = not box.exists()
        for sub in ("cur", "new", "tmp"):
            (box / sub).mkdir(parents=True, exist_ok=True)
        if fresh:
            self.own(box)
        unique = name or f"{time.time_ns()}.{os.getpid()}_{threading.get_ident()}.test"
        path = box / "cur" / f"{unique}:2,{'S' if seen else ''}"
        path.write_bytes(raw)
        if received:
            stamp = datetime.strptime(received, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
            os.utime(path, (stamp, stamp))
        self.own(path)


# The oauth2 passdb: XOAUTH2 and OAUTHBEARER log-ins whose token the authorization server's introspection endpoint
# (RFC 7662) says is active and issued to the address the client names (tests/oauth_server.py).
OAUTH2_PASSDB = """\
passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {root}/dovecot-oauth2.conf.ext
}}
"""
OAUTH2_CONF = """\
introspection_mode = post
introspection_url = {url}
force_introspection = yes
username_attribute = email
active_attribute = active
active_value = true
"""


@contextmanager
def dovecot(accounts: int = 500, *, oauth2_introspection_url: str = "") -> Iterator[Dovecot]:
    """Dovecot unprivileged: as the user running the tests, or, when that is root (CI), as Debian's own `dovecot`
    account, with its own configuration file in a temporary directory that account owns. With
    ``oauth2_introspection_url`` (credentials in it) it also takes XOAUTH2 log-ins, checked there."""
    binary = shutil.which("dovecot") or "/usr/sbin/dovecot"
    if not Path(binary).exists():
        # A fresh machine may lack it: the mail tests skip, naming the package (.ci/run installs it).
        pytest.skip("needs Dovecot for IMAP: apt-get install dovecot-imapd")
    account = pwd.getpwnam("dovecot") if os.getuid() == 0 else pwd.getpwuid(os.getuid())
    directory = Path(tempfile.mkdtemp(prefix="test-dovecot-"))
    port = free_port()
    for sub in ("run", "state", "mail"):
        (directory / sub).mkdir()
    (directory / "users").write_text(
        "".join(
            f"{user}:{{PLAIN}}{password}:{account.pw_uid}:{account.pw_gid}::{directory}/home/{user}\n"
            for user, password in ((f"user{n}", PASSWORD) for n in range(1, accounts + 1))
        )
    )
    if oauth2_introspection_url:
        (directory / "dovecot-oauth2.conf.ext").write_text(OAUTH2_CONF.format(url=oauth2_introspection_url))
    (directory / "dovecot.conf").write_text(
        DOVECOT_CONF.format(
            root=directory,
            user=account.pw_name,
            uid=account.pw_uid,
            gid=account.pw_gid,
            port=port,
            mechanisms=" xoauth2 oauthbearer" if oauth2_introspection_url else "",
            oauth2_passdb=OAUTH2_PASSDB.format(root=directory) if oauth2_introspection_url else "",
        )
    )
    server = Dovecot(host="127.0.0.1", port=port, root=directory, owner=(account.pw_uid, account.pw_gid))
    server.own(directory)
    command = [binary, "-F", "-c", str(directory / "dovecot.conf")]
    if os.getuid() == 0:
        command = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", *command]
    # Its own process group: the master and every process it forks end together at teardown.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        try:
            wait_for_port(port)
        except RuntimeError:
            process.kill()
            log = (directory / "dovecot.log").read_text() if (directory / "dovecot.log").exists() else ""
            errors = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"dovecot did not start: {errors} {log}") from None
        yield server
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):  # still waiting for its children: end the group
            process.wait(timeout=1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        shutil.rmtree(directory, ignore_errors=True)


# aiosmtpd --------------------------------------------------------------------------------------------------------


@dataclass
class Smtp:
    host: str
    port: int
    received: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)


@contextmanager
def smtp(password: str = PASSWORD) -> Iterator[Smtp]:
    """Any user name with this password logs in (each test's IMAP account uses the same one)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    port = free_port()
    box = Smtp(host="127.0.0.1", port=port)

    class Keep:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.received.append(message_from_bytes(envelope.original_content or envelope.content))
            box.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            return "250 OK"

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        if isinstance(data, LoginPassword):
            return AuthResult(success=data.password.decode() == password)
        return AuthResult(success=False, handled=False)

    logging.getLogger("mail.log").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    controller = Controller(
        Keep(),
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_require_tls=False,  # the tests allow plaintext (MAIL_CALENDAR_ALLOW_PLAINTEXT)
        auth_required=True,
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


# Misbehaving ------------------------------------------------------------------------------------------------------


@contextmanager
def _listening(take: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A listener on 127.0.0.1 that hands each connection to ``take`` (with the event set when the block ends);
    its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            take(conn, stop)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        listener.close()


@contextmanager
def silent_server() -> Iterator[int]:
    """Accepts connections and never says a word: a server that hangs."""
    held: list[socket.socket] = []
    try:
        with _listening(lambda conn, stop: held.append(conn)) as port:
            yield port
    finally:
        for sock in held:
            sock.close()


@contextmanager
def trickling_server(greeting: bytes = b"* OK IMAP4rev1 ready, almost\r\n", every: float = 0.2) -> Iterator[int]:
    """Answers one byte at a time, each well within any socket timeout, and never finishes its first line: only a
    deadline on the whole exchange ends a client's wait."""

    def drip(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            for byte in (greeting[:-2] * 1000)[:2000]:
                if stop.wait(every):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def take(conn: socket.socket, stop: threading.Event) -> None:
        threading.Thread(target=drip, args=(conn, stop), daemon=True).start()

    with _listening(take) as port:
        yield port


@contextmanager
def imap_announcing_a_huge_literal(size: int = 50_000_000) -> Iterator[int]:
    """A minimal IMAP server with one plain-text message, which answers the fetch of its text with a literal of
    ``size`` bytes whatever part of it was asked for: what a hostile or broken server could do."""
    import socketserver

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"* OK [CAPABILITY IMAP4rev1] ready\r\n")
            for line in self.rfile:
                tag, _, command = line.decode(errors="replace").strip().partition(" ")
                upper = command.upper()
                if upper.startswith("CAPABILITY"):
                    self.wfile.write(b"* CAPABILITY IMAP4rev1\r\n")
                elif upper.startswith(("SELECT", "EXAMINE")):
                    self.wfile.write(b"* 1 EXISTS\r\n* OK [UIDVALIDITY 1] ok\r\n")
                elif "BODY.PEEK[1]" in upper:
                    self.wfile.write(b"* 1 FETCH (UID 1 BODY[1]<0> {%d}\r\n" % size)
                    try:
                        for _ in range(size // 65536):
                            self.wfile.write(b"x" * 65536)
                    except OSError:
                        return  # the client hung up, as it should
                    self.wfile.write(b")\r\n")
                elif "BODYSTRUCTURE" in upper:
                    self.wfile.write(
                        b'* 1 FETCH (UID 1 BODYSTRUCTURE ("text" "plain" ("charset" "utf-8") NIL NIL "7bit" 100 1) '
                        b'ENVELOPE (NIL "Hello" NIL NIL NIL NIL NIL NIL NIL NIL))\r\n'
                    )
                elif upper.startswith("LOGOUT"):
                    self.wfile.write(b"* BYE\r\n" + tag.encode() + b" OK\r\n")
                    return
                self.wfile.write(tag.encode() + b" OK done\r\n")

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
