"""The providers' callbacks (docs/design.md#channels: these paths are what operators paste into each provider)."""

from django.urls import path

from channels import views

urlpatterns = [
    path("channels/twilio/inbound", views.twilio_inbound, name="channels-twilio-inbound"),
    path("channels/twilio/status", views.twilio_status, name="channels-twilio-status"),
    path("channels/whatsapp/webhook", views.whatsapp_webhook, name="channels-whatsapp-webhook"),
    path("channels/telegram/webhook", views.telegram_webhook, name="channels-telegram-webhook"),
    path("channels/bluebubbles/webhook", views.bluebubbles_webhook, name="channels-bluebubbles-webhook"),
]
