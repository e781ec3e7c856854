from django.contrib import admin
from django.http import HttpRequest

from assistant.models import Action


@admin.register(Action)
class ActionAdmin(admin.ModelAdmin):
    """What the assistant did: each tool call with its arguments, result and time, by delivery."""

    list_display = ["tool", "connection_name", "is_error", "delivery", "attempt", "round", "started_at", "follow_ups"]
    list_filter = ["kind", "is_error"]
    search_fields = ["tool", "connection_name", "delivery__message__public_id"]
    list_select_related = ["delivery"]
    readonly_fields = [
        "delivery", "attempt", "round", "tool_call_id", "kind", "tool", "connection", "connection_name", "arguments",
        "result", "is_error", "started_at", "finished_at", "follow_ups", "last_follow_up_at",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
