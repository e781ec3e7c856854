from django.urls import path

from console.views import channels as views
from console.views.local_phone import local_phone

app_name = "channels"

urlpatterns = [
    path("settings/channels/", views.channel_list, name="settings"),
    path("settings/channels/code/", views.confirm_code, name="confirm"),
    path("settings/channels/telegram/", views.telegram_link, name="telegram"),
    path("settings/channels/quiet-hours/", views.quiet_hours, name="quiet_hours"),
    path("settings/channels/local-phone/", local_phone, name="local_phone"),
    path("settings/channels/<int:linked_id>/unlink/", views.unlink, name="unlink"),
]
