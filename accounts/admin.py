from django.contrib import admin

from accounts.models import Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "phone_number", "channel"]
    list_filter = ["channel"]
    search_fields = ["user__email", "phone_number"]
    raw_id_fields = ["user"]
