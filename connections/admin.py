from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from connections.models import CalendarAccount, Connection, MailAccount, OAuthGrant, Tool


class ToolInline(admin.TabularInline):
    model = Tool
    extra = 0
    can_delete = False
    fields = ["name", "title", "description"]
    readonly_fields = ["name", "title", "description"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class _ConnectedAdmin(admin.ModelAdmin):
    """What connects to a person's servers (an MCP server, a calendar, a mailbox, an OAuth sign-in): added only by
    connecting, in the console or the API; its secrets (encrypted columns) never searched or filtered on."""

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if any(part.endswith("_encrypted") for part in lookup.split(LOOKUP_SEP)):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


_CONNECTION_FIELDS = (
    "public_id", "owner", "name", "server_url", "api_key_set", "active", "server_name", "server_version",
    "created_at", "last_synced_at", "last_error",
)  # fmt: skip


@admin.register(Connection)
class ConnectionAdmin(_ConnectedAdmin):
    list_display = ["name", "owner", "server_url", "active", "tool_count", "last_synced_at", "created_at"]
    list_filter = ["active"]
    search_fields = ["name", "server_url", "owner__email", "public_id"]
    list_select_related = ["owner"]
    # The server's API key is never shown, not even encrypted: only whether one is set.
    fields = _CONNECTION_FIELDS
    readonly_fields = [field for field in _CONNECTION_FIELDS if field not in ("name", "active")]  # staff edit these two
    inlines = [ToolInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Connection]:
        return super().get_queryset(request).prefetch_related("tools")

    @admin.display(boolean=True, description="API key set")
    def api_key_set(self, obj: Connection) -> bool:
        return obj.has_api_key

    @admin.display(description="tools")
    def tool_count(self, obj: Connection) -> int:
        return len(obj.tools.all())


class _AccountAdmin(_ConnectedAdmin):
    """A calendar or mailbox: where it is and whose; the password is never shown, not even encrypted."""

    list_select_related = ["owner"]
    search_fields = ["owner__email", "public_id", "username"]


_CALENDAR_FIELDS = ("public_id", "owner", "server_url", "username", "calendar_name", "calendar_url", "created_at")
_MAILBOX_FIELDS = (
    "public_id", "owner", "address", "username", "imap_host", "imap_port", "imap_security", "smtp_host", "smtp_port",
    "smtp_security", "drafts_folder", "created_at",
)  # fmt: skip


@admin.register(CalendarAccount)
class CalendarAccountAdmin(_AccountAdmin):
    list_display = ["owner", "server_url", "username", "calendar_name", "created_at"]
    fields = readonly_fields = _CALENDAR_FIELDS


@admin.register(MailAccount)
class MailAccountAdmin(_AccountAdmin):
    list_display = ["owner", "address", "imap_host", "smtp_host", "created_at"]
    search_fields = [*_AccountAdmin.search_fields, "address"]
    fields = readonly_fields = _MAILBOX_FIELDS


_GRANT_FIELDS = (
    "owner", "kind", "status", "status_detail", "issuer", "token_endpoint", "revocation_endpoint", "client_id",
    "token_auth_method", "resource", "scope", "expires_at", "refreshed_at", "created_at",
)  # fmt: skip


@admin.register(OAuthGrant)
class OAuthGrantAdmin(_ConnectedAdmin):
    """OAuth sign-ins (connections/oauth/): where and for whom, whether they must sign in again. The tokens and the
    client secret are never shown, not even encrypted, and cannot be searched or filtered on."""

    list_display = ["owner", "kind", "status", "issuer", "expires_at", "refreshed_at"]
    list_filter = ["kind", "status"]
    list_select_related = ["owner"]
    search_fields = ["owner__email", "issuer"]
    fields = readonly_fields = _GRANT_FIELDS
