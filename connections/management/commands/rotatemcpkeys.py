from typing import Any

from django.core.management.base import BaseCommand, CommandError

from connections import crypto
from connections.models import Connection


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored MCP server API key with the first key of MCP_ENCRYPTION_KEYS. Run it after "
        "putting a new key in front; then the old key can be removed from the setting."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = unreadable = 0
        for connection in Connection.objects.exclude(api_key_encrypted="").only("pk", "api_key_encrypted"):
            try:
                token = crypto.rotate(connection.api_key_encrypted)
            except crypto.UnreadableSecret:
                unreadable += 1
                continue
            Connection.objects.filter(pk=connection.pk).update(api_key_encrypted=token)
            rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} API key(s) with the first key of MCP_ENCRYPTION_KEYS.")
        if unreadable:
            raise CommandError(
                f"{unreadable} stored key(s) could not be decrypted with any configured key; keep the key they were "
                "written with in MCP_ENCRYPTION_KEYS, or have their owners add the connections again."
            )
