from django.urls import re_path

from ingestion import callback, cli_auth, followups, mailcal, mcp, profile, triggers, views

# A trailing slash is tolerated: redirecting a POST would lose its body.
urlpatterns = [
    re_path(r"^api/v1/inbound/api-message/?$", views.CurrentMessageView.as_view(), name="api-message"),
    re_path(r"^api/v1/inbound-sms/webhook/?$", views.LegacyWebhookView.as_view(), name="legacy-webhook"),
    re_path(r"^api/v1/inbound/messages/?$", views.MessageListView.as_view(), name="message-list"),
    re_path(
        r"^api/v1/inbound/messages/(?P<message_id>[^/]+)/?$", views.MessageReceiptView.as_view(), name="message-receipt"
    ),
    re_path(r"^api/v1/assistant/replies/?$", callback.AssistantReplyView.as_view(), name="assistant-replies"),
    re_path(r"^api/v1/api-keys/webhook/?$", triggers.CreateTriggerView.as_view(), name="create-webhook-trigger"),
    re_path(
        r"^api/v1/api-keys/webhook/(?P<trigger_id>[^/]+)/log/?$", triggers.TriggerLogView.as_view(), name="trigger-log"
    ),
    re_path(r"^api/v1/inbound/webhook/?$", triggers.FireTriggerByTokenView.as_view(), name="webhook"),
    re_path(
        r"^api/v1/inbound/webhook/(?P<trigger_id>[^/]+)/?$", triggers.FireTriggerView.as_view(), name="webhook-trigger"
    ),
    re_path(r"^api/v1/cli-auth/code/?$", cli_auth.DeviceCodeView.as_view(), name="cli-auth-code"),
    re_path(
        r"^api/v1/cli-auth/poll/(?P<device_code>[^/]+)/?$", cli_auth.DevicePollView.as_view(), name="cli-auth-poll"
    ),
    re_path(r"^api/v1/user/profile/?$", profile.ProfileView.as_view(), name="user-profile"),
    # MCP connections (the CLI's `poke mcp add`; docs/explanation/assistant-tools.md) and their tools' follow-ups
    re_path(r"^api/v1/mcp/callback/?$", followups.FollowUpView.as_view(), name="mcp-follow-up"),
    re_path(r"^api/v1/mcp/connections/?$", mcp.ConnectionListView.as_view(), name="mcp-connections"),
    re_path(r"^api/v1/mcp/connections/cli/?$", mcp.AddConnectionView.as_view(), name="mcp-connection-add"),
    re_path(
        r"^api/v1/mcp/connections/(?P<connection_id>[^/]+)/sync-tools/?$",
        mcp.SyncToolsView.as_view(),
        name="mcp-connection-sync",
    ),
    re_path(
        r"^api/v1/mcp/connections/(?P<connection_id>[^/]+)/(?:activate-tunnel|create-recipe)/?$",
        mcp.TunnelView.as_view(),
        name="mcp-connection-tunnel",
    ),
    re_path(
        r"^api/v1/mcp/connections/(?P<connection_id>[^/]+)/?$", mcp.ConnectionView.as_view(), name="mcp-connection"
    ),
    # The person's calendar (CalDAV) and mailbox (IMAP + SMTP), for the assistant's calendar and mail tools
    re_path(r"^api/v1/connections/calendar/?$", mailcal.CalendarView.as_view(), name="calendar-connection"),
    re_path(r"^api/v1/connections/mailbox/?$", mailcal.MailboxView.as_view(), name="mailbox-connection"),
]
