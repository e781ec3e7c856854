from django.contrib import admin
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from devices.models import DeviceAuthorization


@admin.register(DeviceAuthorization)
class DeviceAuthorizationAdmin(admin.ModelAdmin):
    """Read only: what asked to log in, from where, and what became of it. The device code's digest is not shown."""

    list_display = ["display_code", "status", "client_name", "client_address", "created_at", "decided_by", "api_key"]
    _shown = ["display_code", "status", "client_name", "client_address", "created_at", "decided_by", "api_key"]
    list_filter = ["status", "created_at"]
    search_fields = ["user_code", "client_name", "client_address", "decided_by__email"]
    fields = [*_shown, "expires_at", "decided_at", "collected_at"]
    readonly_fields = [*_shown, "expires_at", "decided_at", "collected_at"]
    list_select_related = ["decided_by", "api_key"]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if "device_code_digest" in lookup.split(LOOKUP_SEP):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DeviceAuthorization | None = None) -> bool:
        return False
