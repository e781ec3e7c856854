from django.contrib import admin

from reminders.models import Reminder


@admin.register(Reminder)
class ReminderAdmin(admin.ModelAdmin):
    list_display = ["text", "owner", "status", "next_due_at", "rrule", "time_zone", "fired_count", "created_at"]
    list_filter = ["status"]
    search_fields = ["text", "owner__email", "public_id"]
    list_select_related = ["owner"]
    readonly_fields = [
        "public_id", "owner", "time_zone", "starts_local", "rrule", "next_due_at", "fired_count", "last_fired_at",
        "created_at", "cancelled_at",
    ]  # fmt: skip
