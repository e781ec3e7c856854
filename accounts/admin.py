from django.contrib import admin
from django.http import HttpRequest

from accounts.models import AuditEvent, Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "phone_number", "channel"]
    list_filter = ["channel"]
    search_fields = ["user__email", "phone_number"]
    raw_id_fields = ["user"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: an audit log that staff could edit would prove nothing."""

    list_display = ["at", "account", "kind", "summary", "actor"]
    list_filter = ["kind", "at"]
    search_fields = ["account__email", "summary", "actor"]
    list_select_related = ["account"]
    date_hierarchy = "at"
    fields = ["at", "account", "kind", "summary", "actor"]
    readonly_fields = ["at", "account", "kind", "summary", "actor"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False
