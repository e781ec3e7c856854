import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from keys.services import find_key, revoke_key


class Command(BaseCommand):
    help = (
        "Revoke the API key with this value (for a leaked key found in the wild). Pass --key - to read it from "
        "standard input, which keeps it out of the shell history and the process list."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key", required=True, help="The full key, or - to read it from standard input.")

    def handle(self, *args: Any, **options: Any) -> None:
        plaintext = sys.stdin.readline() if options["key"] == "-" else options["key"]
        key = find_key(plaintext)
        if key is None:
            raise CommandError("No API key has that value (check that it was copied whole).")
        owner = key.owner.get_username()
        if not revoke_key(key):
            self.stdout.write(
                f"Key {key.name!r} ({key.hint}) of {owner} was already revoked "
                f"at {key.revoked_at:%Y-%m-%d %H:%M:%S %Z}."
            )
            return
        self.stdout.write(f"Revoked key {key.name!r} ({key.hint}) of {owner}. It is refused from the next request on.")
