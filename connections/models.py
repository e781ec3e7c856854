"""A person's MCP servers: where each one is, its API key (encrypted), and the tools it offered at the last sync."""

import re
import secrets
import string

from django.conf import settings
from django.db import models
from django.utils import timezone

_ALPHABET = string.digits + string.ascii_letters
CONNECTION_ID_PREFIX = "mcp_"
_CONNECTION_ID = re.compile(r"mcp_[0-9A-Za-z]{20}")


def new_connection_id() -> str:
    """The connection's public id (what the CLI puts in its URLs): random, so ids reveal no counts."""
    return CONNECTION_ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(20))


def is_connection_id(value: str) -> bool:
    return _CONNECTION_ID.fullmatch(value) is not None


class Connection(models.Model):
    public_id = models.CharField(max_length=32, unique=True, default=new_connection_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_connections")
    name = models.CharField(max_length=100)
    server_url = models.CharField(max_length=2000)
    # Fernet token of the server's API key (connections/crypto.py); empty when the server needs none.
    # Never shown again: the console and the admin only say whether one is set.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    server_name = models.CharField(max_length=200, blank=True, help_text="What the server calls itself.")
    server_version = models.CharField(max_length=100, blank=True)
    active = models.BooleanField(default=True, help_text="The assistant offers the tools of active connections only.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_synced_at = models.DateTimeField(null=True, blank=True, help_text="When the tools were last read.")
    last_error = models.TextField(blank=True, help_text="Why the last sync or tool call failed, if it did.")

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.server_url})"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class Tool(models.Model):
    """A tool as the server listed it (tools/list): its name, description and JSON schema for the arguments."""

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=255)
    title = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["connection", "name"], name="connections_tool_unique_name")]

    def __str__(self) -> str:
        return self.name
