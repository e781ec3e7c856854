from django.urls import path

from console.views import connections as views
from console.views import mailcal, oauth_mail

app_name = "connections"

urlpatterns = [
    path("connections/", views.connection_list, name="list"),
    path("connections/calendar/", mailcal.add_calendar, name="add-calendar"),
    path("connections/mailbox/", mailcal.add_mailbox, name="add-mailbox"),
    path("connections/<str:kind>/remove-account/", mailcal.remove, name="remove-account"),
    path("connections/oauth/callback/", views.oauth_callback, name="oauth-callback"),
    path("connections/oauth/client.json", views.oauth_client, name="oauth-client"),
    path("connections/oauth/<str:kind>/connect/", oauth_mail.start, name="oauth-mail-start"),
    path("connections/oauth/<str:kind>/callback/", oauth_mail.callback, name="oauth-mail-callback"),
    path("connections/oauth/<str:kind>/disconnect/", oauth_mail.disconnect, name="oauth-mail-disconnect"),
    path("connections/<str:public_id>/sync/", views.sync, name="sync"),
    path("connections/<str:public_id>/sign-in/", views.sign_in_again, name="sign-in-again"),
    path("connections/<str:public_id>/remove/", views.remove, name="remove"),
    path("connections/<str:public_id>/trust/", views.trust, name="trust"),
    path("connections/<str:public_id>/mark-tool/", views.mark_tool, name="mark-tool"),
]
