from django.contrib import admin
from django.db.models import Q

from assistant.models import Action
from conversations.models import is_message_id
from ops.admin_lists import LargeTableAdmin


@admin.register(Action)
class ActionAdmin(LargeTableAdmin):
    """What the assistant did: each tool call with its arguments, result and time, by delivery."""

    list_display = ["tool", "connection_name", "is_error", "delivery", "attempt", "round", "started_at", "follow_ups"]
    search_fields = ["delivery__message__public_id"]
    search_help_text = "The id (msg_…) of the message whose delivery called the tools."
    list_select_related = ["delivery"]
    # Every field: an editable one pointing at a message would list every message in a drop-down.
    readonly_fields = [field.name for field in Action._meta.fields]

    def search_condition(self, term: str) -> Q:
        return Q(delivery__message__public_id=term) if is_message_id(term) else Q(pk__in=[])
