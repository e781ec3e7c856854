from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from accounts import audit
from keys.admin import CredentialAdmin
from triggers.models import WebhookTrigger
from triggers.services import revoke_trigger


@admin.register(WebhookTrigger)
class WebhookTriggerAdmin(CredentialAdmin[WebhookTrigger]):
    secret_fields = frozenset({"digest", "signing_salt"})  # the token's, and the signing secret's
    noun = "trigger"
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

    @admin.display(boolean=True, description="accepts signatures")
    def signs(self, obj: WebhookTrigger) -> bool:
        return obj.signs

    @admin.display(description="delivery log")
    def delivery_log(self, obj: WebhookTrigger) -> str:
        # By URL name: the log's model lives in the ingestion app, a layer above this one.
        url = reverse("admin:ingestion_triggerfiring_changelist") + f"?trigger__id__exact={obj.pk}"
        return format_html('<a href="{}">Its last requests</a>', url)

    def revoke(self, credential: WebhookTrigger) -> bool:
        return revoke_trigger(credential, by=audit.ADMIN)
