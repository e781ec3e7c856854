from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest

from accounts.models import AuditEvent, Profile
from ops.admin_lists import LargeTableAdmin, people_with_email


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "phone_number", "channel"]
    list_filter = ["channel"]
    search_fields = ["user__email", "phone_number"]
    raw_id_fields = ["user"]


@admin.register(AuditEvent)
class AuditEventAdmin(LargeTableAdmin):
    """Read-only: an audit log that staff could edit would prove nothing. Newest first through the index on ``at``."""

    list_display = ["at", "account", "kind", "summary", "actor"]
    search_fields = ["account__email"]
    search_help_text = "The exact email of the account."
    list_select_related = ["account"]
    ordering = ("-at", "-id")
    fields = ["at", "account", "kind", "summary", "actor"]
    readonly_fields = ["at", "account", "kind", "summary", "actor"]

    def search_condition(self, term: str) -> Q:
        return Q(account_id__in=people_with_email(term))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False
