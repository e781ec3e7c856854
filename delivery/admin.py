"""The admin's delivery list: what became of each message's hand-off, with a retry action for staff."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from conversations.models import Delivery
from delivery.metrics import queue_state
from delivery.tasks import retry_delivery


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "message_id_display",
        "endpoint",
        "status",
        "attempts",
        "takeovers",
        "backend",
        "api_key",
        "started_at",
        "finished_at",
        "next_attempt_at",
        "short_error",
    ]
    list_filter = ["status", ("api_key", admin.RelatedOnlyFieldListFilter), "backend", "endpoint", "created_at"]
    search_fields = [
        "request_id",
        "message__public_id",
        "api_key__name",
        "api_key__hint",
        "message__text",
        "message__conversation__user__email",
    ]
    readonly_fields = [
        "message",
        "api_key",
        "endpoint",
        "status",
        "attempts",
        "takeovers",
        "backend",
        "last_error",
        "lease_expires_at",
        "reply",
        "callback_id",
        "request_id",
        "created_at",
        "started_at",
        "finished_at",
        "next_attempt_at",
        "updated_at",
    ]
    list_select_related = ["message", "api_key"]
    date_hierarchy = "created_at"
    actions = ["retry_selected"]

    @admin.display(description="message", ordering="message__public_id")
    def message_id_display(self, obj: Delivery) -> str:
        return obj.message.public_id

    @admin.display(description="last error")
    def short_error(self, obj: Delivery) -> str:
        return obj.last_error[:80]

    @admin.action(description="Retry the selected deliveries now")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        retried = skipped = 0
        for delivery in queryset:
            if retry_delivery(delivery):
                retried += 1
            else:
                skipped += 1
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


def _deliveries(count: int) -> str:
    return "delivery" if count == 1 else "deliveries"
