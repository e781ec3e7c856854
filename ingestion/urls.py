from django.urls import re_path

from ingestion import callback, views

# A trailing slash is tolerated: redirecting a POST would lose its body.
urlpatterns = [
    re_path(r"^api/v1/inbound/api-message/?$", views.CurrentMessageView.as_view(), name="api-message"),
    re_path(r"^api/v1/inbound-sms/webhook/?$", views.LegacyWebhookView.as_view(), name="legacy-webhook"),
    re_path(
        r"^api/v1/inbound/messages/(?P<message_id>[^/]+)/?$", views.MessageReceiptView.as_view(), name="message-receipt"
    ),
    re_path(r"^api/v1/assistant/replies/?$", callback.AssistantReplyView.as_view(), name="assistant-replies"),
]
