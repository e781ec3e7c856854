"""The admin's delivery list: what became of each message's hand-off, with a retry action for staff. One of the
large-table lists (ops/admin_lists.py)."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from conversations.models import Delivery, is_message_id
from delivery.metrics import queue_state
from delivery.tasks import retry_delivery
from keys.models import ApiKey
from ops.admin_lists import LargeTableAdmin


class ApiKeyFilter(admin.SimpleListFilter):
    """One key's deliveries (?api_key=<id>, linked from the key's admin page), through the (api_key, created_at)
    index. It never lists the keys that have deliveries, which would read every delivery."""

    title = "API key"
    parameter_name = "api_key"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        chosen = self.value()
        key = ApiKey.objects.filter(pk=chosen).first() if chosen and chosen.isdigit() else None
        return [(str(key.pk), str(key))] if key else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> QuerySet[Delivery]:
        chosen = self.value()
        if not chosen:
            return queryset
        return queryset.filter(api_key_id=int(chosen) if chosen.isdigit() else None)


@admin.register(Delivery)
class DeliveryAdmin(LargeTableAdmin):
    list_display = [
        "created_at", "message_id_display", "endpoint", "status", "attempts", "takeovers", "backend", "api_key",
        "started_at", "finished_at", "next_attempt_at", "short_error",
    ]  # fmt: skip
    list_filter = ["status", ApiKeyFilter]  # each served by an index; a filter on another column would scan
    search_fields = ["message__public_id"]
    search_help_text = "A message id (msg_…)."
    readonly_fields = [
        "message", "api_key", "endpoint", "status", "attempts", "takeovers", "backend", "last_error",
        "lease_expires_at", "reply", "callback_id", "request_id", "created_at", "started_at", "finished_at",
        "next_attempt_at", "updated_at",
    ]  # fmt: skip
    list_select_related = ["message", "api_key"]
    actions = ["retry_selected"]

    @admin.display(description="message", ordering="message__public_id")
    def message_id_display(self, obj: Delivery) -> str:
        return obj.message.public_id

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        if ApiKeyFilter.parameter_name in request.GET:  # one key's: its (api_key, created_at) index
            return ("-created_at", "-id")
        return ("-pk",)

    def search_condition(self, term: str) -> Q:
        # A person's are one click away, from their messages (?q=<email> there) or their key (its filter here):
        # through the thread, a join to every delivery of a busy person would be planned as a scan of them all.
        return Q(message__public_id=term) if is_message_id(term) else Q(pk__in=[])

    @admin.display(description="last error")
    def short_error(self, obj: Delivery) -> str:
        return obj.last_error[:80]

    @admin.action(description="Retry the selected deliveries now")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        retried = sum(retry_delivery(delivery) for delivery in queryset)
        skipped = len(queryset) - retried  # the rows read above, not counted again
        self.message_user(request, f"Queued {retried} {_deliveries(retried)} for a fresh round of attempts.")
        if skipped:
            self.message_user(
                request,
                f"Skipped {skipped} {_deliveries(skipped)} already delivered or being attempted right now.",
                level=messages.WARNING,
            )

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, object] | None = None) -> HttpResponse:
        # The same figures as /metrics, above the list: is the hand-off keeping up?
        return super().changelist_view(request, {**(extra_context or {}), "queue": queue_state()})


def _deliveries(count: int) -> str:
    return "delivery" if count == 1 else "deliveries"
