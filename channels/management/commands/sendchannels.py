"""The Procfile's ``channels:`` process: sends the outbox to the people's phones (channels/outbound/sender.py).

SIGTERM or Ctrl+C: claim nothing more, let the sends in flight finish (CHANNEL_GRACE_SECONDS), put back any that
could not; a second signal ends the grace at once. ``--batch``: send what is due now and exit."""

import signal
import threading
from argparse import ArgumentParser
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand

from channels.outbound.sender import Sender


class Command(BaseCommand):
    help = "Send the outbox to the people's channels (SMS, WhatsApp, iMessage, Telegram) until stopped."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--batch", action="store_true", help="Send what is due now, then exit.")
        parser.add_argument(
            "--concurrency", type=int, default=None, help="Sends in flight (default: CHANNEL_CONCURRENCY)."
        )

    def handle(self, *, batch: bool, concurrency: int | None, **options: Any) -> None:
        sender = Sender(concurrency=concurrency)
        if not sender.adapters:
            self.stderr.write("No channel is configured (README, Channels): there is nothing to send.")
        if batch:
            self.stdout.write(f"{sender.drain()} outbox row(s) sent or settled.")
            return
        stopping = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if stopping.is_set():
                sender.hurry()
            stopping.set()

        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, on_signal)
        sender.start()
        while not stopping.wait(0.5):
            pass
        sender.stop()
        self.stdout.write("Channel worker stopped.")
