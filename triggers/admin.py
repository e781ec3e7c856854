from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from accounts import audit
from triggers.models import WebhookTrigger
from triggers.services import revoke_trigger


@admin.register(WebhookTrigger)
class WebhookTriggerAdmin(admin.ModelAdmin):
    # Neither the token's digest nor the signing salt is shown or filterable (see keys/admin.py on digests).
    list_display = [
        "public_id", "condition", "owner", "hint", "created_at", "last_fired_at", "fire_count", "revoked_at",
    ]  # fmt: skip
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["public_id", "condition", "action", "hint", "owner__email", "owner__username"]
    fields = [
        "public_id", "owner", "condition", "action", "hint", "signs", "created_with", "created_at", "last_fired_at",
        "fire_count", "revoked_at", "delivery_log",
    ]  # fmt: skip
    readonly_fields = [
        "public_id", "owner", "hint", "signs", "created_with", "created_at", "last_fired_at", "fire_count",
        "revoked_at", "delivery_log",
    ]  # fmt: skip
    list_select_related = ["owner"]
    actions = ["revoke_selected"]

    @admin.display(boolean=True, description="accepts signatures")
    def signs(self, obj: WebhookTrigger) -> bool:
        return obj.signs

    @admin.display(description="delivery log")
    def delivery_log(self, obj: WebhookTrigger) -> str:
        # By URL name: the log's model lives in the ingestion app, a layer above this one.
        url = reverse("admin:ingestion_triggerfiring_changelist") + f"?trigger__id__exact={obj.pk}"
        return format_html('<a href="{}">Its last requests</a>', url)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if {"digest", "signing_salt"} & set(lookup.split(LOOKUP_SEP)):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the token must be shown once: triggers are created in the console or through the API

    def has_change_permission(self, request: HttpRequest, obj: WebhookTrigger | None = None) -> bool:
        if obj is not None and obj.is_revoked:
            return False
        return super().has_change_permission(request, obj)

    @admin.action(description="Revoke selected webhook triggers", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[WebhookTrigger]) -> None:
        revoked = sum(revoke_trigger(trigger, by=audit.ADMIN) for trigger in queryset)
        self.message_user(request, f"Revoked {revoked} trigger(s).", messages.SUCCESS)

    def get_actions(self, request: HttpRequest, action_location: Any = ActionLocation.CHANGE_LIST) -> dict[str, Any]:
        actions = super().get_actions(request, action_location=action_location)
        actions.pop("delete_selected", None)  # revoked, not deleted: their messages keep naming them
        return actions
