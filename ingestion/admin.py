from django.contrib import admin
from django.http import HttpRequest

from ingestion.models import TriggerFiring


@admin.register(TriggerFiring)
class TriggerFiringAdmin(admin.ModelAdmin):
    """Webhook triggers' delivery logs, read-only (ingestion/trigger_log.py writes them). A trigger's own log is
    linked from its page (?trigger__id__exact=<id>)."""

    list_display = ["at", "trigger", "outcome", "code", "count", "last_at", "summary", "message"]
    list_filter = ["outcome", "code", "at"]
    search_fields = ["trigger__public_id", "trigger__owner__email", "code", "summary"]
    list_select_related = ["trigger", "message"]
    raw_id_fields = ["trigger", "message"]
    date_hierarchy = "at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: TriggerFiring | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: TriggerFiring | None = None) -> bool:
        return False
