"""The console's pages, one namespace per section (keys:list, accounts:login, …), in the order Django tries them."""

from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path, re_path

from console import password_reset
from console.forms.accounts import EmailAuthenticationForm
from console.views import (
    accounts,
    approvals,
    audit,
    channels,
    connections,
    devices,
    keys,
    mailcal,
    oauth_mail,
    reminders,
    thread,
    triggers,
)
from console.views.local_phone import local_phone


def section(namespace: str, patterns: list[URLPattern]) -> URLResolver:
    return path("", include((patterns, namespace)))


urlpatterns = [
    section(
        "accounts",
        [
            path("signup/", accounts.signup, name="signup"),
            path("signup/sent/", accounts.signup_sent, name="signup_sent"),
            # The token is in the query string, which no log keeps (console/signup_confirmation.py).
            path("signup/confirm/", accounts.signup_confirm, name="signup_confirm"),
            path(
                "login/",
                accounts.LoginView.as_view(
                    template_name="accounts/login.html",
                    authentication_form=EmailAuthenticationForm,
                    redirect_authenticated_user=True,
                ),
                name="login",
            ),
            path("logout/", auth_views.LogoutView.as_view(), name="logout"),
            path("password-reset/", password_reset.PasswordResetView.as_view(), name="password_reset"),
            path("password-reset/sent/", password_reset.PasswordResetSentView.as_view(), name="password_reset_sent"),
            # The token is in this path only until the view puts it in the session and redirects to
            # .../set-password/; the access log writes the route, not the path (ops/middleware.py).
            path(
                "reset/<uidb64>/<token>/",
                password_reset.PasswordResetConfirmView.as_view(),
                name="password_reset_confirm",
            ),
            path("reset/done/", password_reset.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
            path("settings/", accounts.contact_settings, name="settings"),
            path("settings/password/", accounts.ConsolePasswordChangeView.as_view(), name="password_change"),
            path("settings/delete-history/", accounts.delete_history, name="delete_history"),
            path("settings/delete-account/", accounts.delete_account, name="delete_account"),
        ],
    ),
    section(
        "keys",
        [
            path("keys/", keys.key_list, name="list"),
            path("keys/new/", keys.new_key, name="new"),
            path("keys/<int:pk>/", keys.key_detail, name="detail"),
            path("keys/<int:pk>/scopes/", keys.key_scopes, name="scopes"),
            path("keys/<int:pk>/rename/", keys.rename, name="rename"),
            path("keys/<int:pk>/tools/", keys.tool_policy, name="tools"),
            path("keys/<int:pk>/roll/", keys.roll, name="roll"),
            path("keys/<int:pk>/test-message/", keys.send_test_message, name="test-message"),
            path("keys/<int:pk>/revoke/", keys.revoke, name="revoke"),
            path("settings/advanced/", keys.advanced, name="advanced"),
            path("settings/advanced/legacy-key/", keys.new_legacy_key, name="new-legacy"),
        ],
    ),
    section("audit", [path("settings/audit-log/", audit.audit_log, name="log")]),
    section("approvals", [path("conversation/approvals/<int:pk>/", approvals.approval, name="detail")]),
    section(
        "conversations",
        [
            path("conversation/", thread.thread, name="thread"),
            path("conversation/messages/", thread.send, name="send"),
            path("conversation/updates/", thread.updates, name="updates"),
            path("conversation/messages/<str:message_id>/", thread.message_detail, name="message"),
        ],
    ),
    # /device, without the slash, is what the poke CLI opens ({POKE_FRONTEND}/device).
    section("devices", [re_path(r"^device/?$", devices.device, name="approve")]),
    section(
        "triggers",
        [
            path("webhooks/", triggers.trigger_list, name="list"),
            path("webhooks/new/", triggers.new_trigger, name="new"),
            path("webhooks/<int:pk>/log/", triggers.firing_log, name="log"),
            path("webhooks/<int:pk>/revoke/", triggers.revoke, name="revoke"),
        ],
    ),
    section(
        "connections",
        [
            path("connections/", connections.connection_list, name="list"),
            path("connections/calendar/", mailcal.add_calendar, name="add-calendar"),
            path("connections/mailbox/", mailcal.add_mailbox, name="add-mailbox"),
            path("connections/<str:kind>/remove-account/", mailcal.remove, name="remove-account"),
            path("connections/oauth/callback/", connections.oauth_callback, name="oauth-callback"),
            path("connections/oauth/client.json", connections.oauth_client, name="oauth-client"),
            path("connections/oauth/<str:kind>/connect/", oauth_mail.start, name="oauth-mail-start"),
            path("connections/oauth/<str:kind>/callback/", oauth_mail.callback, name="oauth-mail-callback"),
            path("connections/oauth/<str:kind>/disconnect/", oauth_mail.disconnect, name="oauth-mail-disconnect"),
            path("connections/<str:public_id>/sync/", connections.sync, name="sync"),
            path("connections/<str:public_id>/sign-in/", connections.sign_in_again, name="sign-in-again"),
            path("connections/<str:public_id>/remove/", connections.remove, name="remove"),
            path("connections/<str:public_id>/trust/", connections.trust, name="trust"),
            path("connections/<str:public_id>/mark-tool/", connections.mark_tool, name="mark-tool"),
        ],
    ),
    section(
        "reminders",
        [
            path("reminders/", reminders.reminder_list, name="list"),
            path("reminders/<str:public_id>/cancel/", reminders.cancel, name="cancel"),
        ],
    ),
    section(
        "channels",
        [
            path("settings/channels/", channels.channel_list, name="settings"),
            path("settings/channels/code/", channels.confirm_code, name="confirm"),
            path("settings/channels/telegram/", channels.telegram_link, name="telegram"),
            path("settings/channels/quiet-hours/", channels.quiet_hours, name="quiet_hours"),
            path("settings/channels/local-phone/", local_phone, name="local_phone"),
            path("settings/channels/<int:linked_id>/unlink/", channels.unlink, name="unlink"),
        ],
    ),
]
