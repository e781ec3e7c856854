from django.contrib import admin
from django.db.models import Q

from accounts.admin import ReadOnly
from ingestion.models import TriggerFiring
from ops.admin_lists import LargeTableAdmin, people_with_email
from triggers.models import WebhookTrigger


@admin.register(TriggerFiring)
class TriggerFiringAdmin(ReadOnly, LargeTableAdmin):
    """Webhook triggers' delivery logs, read-only (ingestion/trigger_log.py writes them). A trigger's own log is
    linked from its page (?trigger__id__exact=<id>)."""

    list_display = ["at", "trigger", "outcome", "code", "count", "last_at", "summary", "message"]
    search_fields = ["trigger__public_id"]
    search_help_text = "A trigger's id, or the exact email of its owner."
    list_select_related = ["trigger", "message"]
    raw_id_fields = ["trigger", "message"]

    def search_condition(self, term: str) -> Q:
        owned = WebhookTrigger.objects.filter(owner_id__in=people_with_email(term)) if "@" in term else None
        if owned is None:
            return Q(trigger__public_id=term)
        return Q(trigger_id__in=list(owned.values_list("pk", flat=True)))
