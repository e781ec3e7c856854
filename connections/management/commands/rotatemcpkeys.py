from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Model

from connections import crypto
from connections.models import CalendarAccount, Connection, MailAccount, OAuthGrant

# Every encrypted secret: the MCP servers' API keys, the calendars' and mailboxes' app passwords.
ENCRYPTED: list[tuple[type[Model], str]] = [
    (Connection, "api_key_encrypted"),
    (CalendarAccount, "password_encrypted"),
    (MailAccount, "password_encrypted"),
    (OAuthGrant, "client_secret_encrypted"),
    (OAuthGrant, "access_token_encrypted"),
    (OAuthGrant, "refresh_token_encrypted"),
]


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (MCP server API keys, calendar and mailbox passwords, OAuth tokens and "
        "client secrets) with the first key of "
        "MCP_ENCRYPTION_KEYS. Run it after putting a new key in front; then the old key can be removed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = unreadable = 0
        for model, field in ENCRYPTED:
            manager = model._default_manager
            for pk, token in manager.exclude(**{field: ""}).values_list("pk", field):
                try:
                    fresh = crypto.rotate(token)
                except crypto.UnreadableSecret:
                    unreadable += 1
                    continue
                manager.filter(pk=pk, **{field: token}).update(**{field: fresh})
                rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} secret(s) with the first key of MCP_ENCRYPTION_KEYS.")
        if unreadable:
            raise CommandError(
                f"{unreadable} stored secret(s) could not be decrypted with any configured key; keep the key they "
                "were written with in MCP_ENCRYPTION_KEYS, or have their owners add the connections again."
            )
