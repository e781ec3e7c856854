from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from conversations.models import Conversation, Message


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["created_at", "role", "source", "text", "api_key"]
    readonly_fields = ["created_at", "role", "source", "text", "api_key"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at"]
    search_fields = ["user__email", "user__username"]
    readonly_fields = ["user", "created_at"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["created_at", "conversation", "role", "source", "short_text", "api_key", "test"]
    list_filter = ["role", "source", "test", "created_at"]
    search_fields = ["public_id", "text", "conversation__user__email", "api_key__name", "api_key__hint"]
    readonly_fields = [
        "public_id", "conversation", "role", "source", "text", "context", "api_key", "trigger", "test", "created_at",
    ]  # fmt: skip
    list_select_related = ["conversation__user", "api_key"]
    date_hierarchy = "created_at"

    @admin.display(description="text")
    def short_text(self, obj: Message) -> str:
        return obj.text[:80]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
