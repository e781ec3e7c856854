"""The admin's outbox: each text sent (or being sent, held, failed) to a person's phone, with the provider's
statuses, and an action for staff to send the selected ones again."""

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from channels.models import OutboundMessage, OutboundStatus, QuietHours
from channels.outbound.summary import status_of
from conversations.models import is_message_id
from ops.admin_lists import LargeTableAdmin


@admin.register(OutboundMessage)
class OutboundMessageAdmin(LargeTableAdmin):
    list_display = [
        "created_at",
        "message_id_display",
        "part_display",
        "channel",
        "address",
        "status",
        "provider_status",
        "attempts",
        "takeovers",
        "sent_at",
        "next_attempt_at",
        "short_problem",
    ]
    # Waiting and being sent through the queue's index, failed and held through theirs; sent ones are most rows, so
    # a page of them is read newest first and stops after it. A filter on another column would scan.
    list_filter = ["status"]
    search_fields = ["message__public_id"]
    search_help_text = "A message id (msg_…) or the provider's message id."
    readonly_fields = [f.name for f in OutboundMessage._meta.fields]
    list_select_related = ["message"]
    actions = ["send_again"]

    def search_condition(self, term: str) -> Q:
        if is_message_id(term):
            return Q(message__public_id=term)
        return Q(provider_message_id=term)

    @admin.display(description="message", ordering="message__public_id")
    def message_id_display(self, obj: OutboundMessage) -> str:
        return obj.message.public_id

    @admin.display(description="part")
    def part_display(self, obj: OutboundMessage) -> str:
        return f"{obj.part}/{obj.parts}"

    @admin.display(description="problem")
    def short_problem(self, obj: OutboundMessage) -> str:
        shown = {"held": obj.held_reason, "failed": obj.last_error, "retrying": obj.last_error}
        text = shown.get(status_of(obj), "") or obj.provider_error
        return text[:80] + ("…" if len(text) > 80 else "")

    @admin.action(description="Send the selected texts again now (failed or held ones)")
    def send_again(self, request: HttpRequest, queryset: QuerySet[OutboundMessage]) -> None:
        count = queryset.filter(status__in=[OutboundStatus.FAILED, OutboundStatus.HELD]).update(
            status=OutboundStatus.QUEUED,
            attempts=0,
            takeovers=0,
            next_attempt_at=None,
            held_reason="",
            updated_at=timezone.now(),
        )
        self.message_user(request, f"{count} text(s) queued to be sent again.", messages.SUCCESS)


@admin.register(QuietHours)
class QuietHoursAdmin(admin.ModelAdmin):
    list_display = ["person", "starts", "ends"]
    search_fields = ["person__email"]
