from django.contrib import admin

from accounts.admin import SecretDigestAdmin, Unchangeable
from devices.models import DeviceAuthorization


@admin.register(DeviceAuthorization)
class DeviceAuthorizationAdmin(Unchangeable, SecretDigestAdmin[DeviceAuthorization]):
    """Read only: what asked to log in, from where, and what became of it. The device code's digest is not shown."""

    list_display = ["display_code", "status", "client_name", "client_address", "created_at", "decided_by", "api_key"]
    _shown = ["display_code", "status", "client_name", "client_address", "created_at", "decided_by", "api_key"]
    list_filter = ["status", "created_at"]
    search_fields = ["user_code", "client_name", "client_address", "decided_by__email"]
    fields = [*_shown, "expires_at", "decided_at", "collected_at"]
    readonly_fields = [*_shown, "expires_at", "decided_at", "collected_at"]
    list_select_related = ["decided_by", "api_key"]
    secret_fields = frozenset({"device_code_digest"})
