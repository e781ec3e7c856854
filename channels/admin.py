"""The channels app's pages in Django's admin: who linked which address (staff may unlink one by deleting it), the
pending proofs (never their digests), and the provider ids recorded. Nothing is added here: an address is linked
only with the proof that it is the person's. The outbox and quiet hours: channels/outbound/admin.py."""

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin import SecretDigestAdmin, Unchangeable
from channels.models import InboundEvent, LinkCode, LinkedAddress
from channels.outbound import admin as outbound_admin  # noqa: F401  (registers the outbox and quiet hours)


@admin.register(LinkedAddress)
class LinkedAddressAdmin(admin.ModelAdmin):
    list_display = ["address", "channel", "user", "linked_at", "last_inbound_at"]
    list_filter = ["channel", "linked_at"]
    search_fields = ["address", "user__email", "user__username"]
    readonly_fields = ["user", "channel", "address", "linked_at", "last_inbound_at"]
    list_select_related = ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(LinkCode)
class LinkCodeAdmin(Unchangeable, SecretDigestAdmin[LinkCode]):
    secret_fields = frozenset({"code_digest"})  # a 6-digit code's keyed digest is still a lead to the code
    list_display = ["user", "channel", "address", "created_at", "expires_at", "tries", "used_at"]
    list_filter = ["channel", "created_at"]
    search_fields = ["address", "user__email", "user__username"]
    fields = ["user", "channel", "address", "created_at", "expires_at", "tries", "used_at"]
    readonly_fields = ["user", "channel", "address", "created_at", "expires_at", "tries", "used_at"]
    list_select_related = ["user"]


@admin.register(InboundEvent)
class InboundEventAdmin(Unchangeable, admin.ModelAdmin):
    list_display = ["provider_message_id", "channel", "address", "message", "received_at"]
    list_filter = ["channel", "received_at"]
    search_fields = ["provider_message_id", "address"]
    readonly_fields = ["channel", "provider_message_id", "address", "message", "received_at"]
    list_select_related = ["message"]
