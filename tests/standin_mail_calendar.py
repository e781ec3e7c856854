"""Try the calendar and mail tools on your machine: the same local servers the tests use (tests/mail_servers.py), on
127.0.0.1, with one account. Radicale serves CalDAV with an empty calendar, Dovecot serves IMAP with one unread
message in the inbox, aiosmtpd takes SMTP and prints every message sent through it.

    .venv/bin/python -m tests.standin_mail_calendar

It prints what to type on the console's Connections page (or the curl commands for the API);
docs/howto/connect-calendar-mailbox.md walks through it. Dovecot comes from Debian's dovecot-imapd package."""

import argparse
import json
import shutil
import signal
import tempfile
import threading
from contextlib import ExitStack
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

from tests import mail_servers


def welcome_message(address: str) -> bytes:
    message = EmailMessage()
    message["From"] = "Sam Rivera <sam@example.com>"
    message["To"] = address
    message["Subject"] = "Lunch on Thursday?"
    message["Date"] = format_datetime(datetime.now(UTC))
    message.set_content("Are you free for lunch on Thursday at 12:30? The usual place.")
    return message.as_bytes()


def print_what_is_sent(box: mail_servers.Smtp, stop: threading.Event) -> None:
    shown = 0
    while not stop.wait(0.5):
        for message in box.received[shown:]:
            print(f"\nSMTP received: To {message['To']}, Subject {message['Subject']!r}", flush=True)
        shown = len(box.received)


def stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the servers' context managers then stop Dovecot and remove the folders


def main() -> None:
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    if not (shutil.which("dovecot") or Path("/usr/sbin/dovecot").exists()):
        raise SystemExit("Dovecot is not installed: apt-get install dovecot-imapd")
    import caldav

    password = mail_servers.PASSWORD
    with ExitStack() as running:
        calendar = running.enter_context(
            mail_servers.radicale(Path(tempfile.mkdtemp(prefix="radicale-")), {"you": password})
        )
        caldav.DAVClient(url=calendar.url, username="you", password=password).principal().make_calendar(
            name="Personal", cal_id="personal"
        )
        imap = running.enter_context(mail_servers.dovecot(accounts=1))
        user = imap.next_user()
        imap.deliver(user, welcome_message(f"{user}@example.com"))
        outgoing = running.enter_context(mail_servers.smtp(password))
        mailbox = {
            "address": f"{user}@example.com", "username": user, "password": password,
            "imapHost": imap.host, "imapPort": imap.port, "imapSecurity": "none",
            "smtpHost": outgoing.host, "smtpPort": outgoing.port, "smtpSecurity": "none",
        }  # fmt: skip
        print("Local servers running (stop with Ctrl-C).\n")
        print(f"Calendar (CalDAV): server URL {calendar.url}  username you  password {password}")
        print(
            f"Mailbox: address {user}@example.com  username {user}  password {password}\n"
            f"         IMAP {imap.host} port {imap.port} security none;  SMTP {outgoing.host} port {outgoing.port} "
            "security none\n"
        )
        print("Or with a key that has connections:manage:\n")
        calendar_body = json.dumps({"serverUrl": calendar.url, "username": "you", "password": password})
        print(
            'curl -X POST http://127.0.0.1:8000/api/v1/connections/calendar -H "Authorization: Bearer $KEY" '
            f"-H 'Content-Type: application/json' -d '{calendar_body}'"
        )
        print(
            'curl -X POST http://127.0.0.1:8000/api/v1/connections/mailbox -H "Authorization: Bearer $KEY" '
            f"-H 'Content-Type: application/json' -d '{json.dumps(mailbox)}'\n",
            flush=True,
        )
        stop = threading.Event()
        threading.Thread(target=print_what_is_sent, args=(outgoing, stop), daemon=True).start()
        try:
            stop.wait()
        except KeyboardInterrupt:
            stop.set()


if __name__ == "__main__":
    main()
