"""Threads and messages in the admin. Messages only grow: their list is one of the large-table lists
(ops/admin_lists.py), and a thread's page shows its latest messages and links to the rest, never all of them."""

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from conversations.models import Conversation, Message, is_message_id
from ops.admin_lists import LargeTableAdmin

LATEST_SHOWN = 20  # messages a thread's page shows; the rest are one link away


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at"]
    search_fields = ["user__email", "user__username"]
    fields = ["user", "created_at", "latest_messages"]
    readonly_fields = ["user", "created_at", "latest_messages"]
    list_select_related = ["user"]

    @admin.display(description=f"latest {LATEST_SHOWN} messages")
    def latest_messages(self, obj: Conversation) -> str:
        latest = obj.messages.order_by("-created_at", "-id")[:LATEST_SHOWN]  # the (conversation, created_at) index
        rows = format_html_join(
            "",
            "<li>{} · {} · {}</li>",
            ((message.created_at, message.get_role_display(), message.text[:200]) for message in latest),
        )
        every = reverse("admin:conversations_message_changelist") + f"?conversation__id__exact={obj.pk}"
        return format_html('<ul>{}</ul><a href="{}">Every message of the thread</a>', rows, every)


@admin.register(Message)
class MessageAdmin(LargeTableAdmin):
    list_display = ["created_at", "public_id", "conversation", "role", "source", "short_text", "api_key", "test"]
    search_fields = ["public_id"]
    search_help_text = "A message id (msg_…) or the exact email of its person."
    readonly_fields = [
        "public_id", "conversation", "role", "source", "text", "context", "api_key", "trigger", "test", "created_at",
    ]  # fmt: skip
    list_select_related = ["conversation__user", "api_key"]

    @admin.display(description="text")
    def short_text(self, obj: Message) -> str:
        return obj.text[:80]

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        if "conversation__id__exact" in request.GET:  # one thread: its (conversation, created_at) index
            return ("-created_at", "-id")
        return ("-pk",)

    def search_condition(self, term: str) -> Q:
        if is_message_id(term):
            return Q(public_id=term)
        # The threads looked up first, as ops.admin_lists.people_with_email looks up people.
        return Q(conversation_id__in=list(Conversation.objects.filter(user__email=term).values_list("pk", flat=True)))
