from django.urls import path

from console.views import connections as views
from console.views import mailcal

app_name = "connections"

urlpatterns = [
    path("connections/", views.connection_list, name="list"),
    path("connections/calendar/", mailcal.add_calendar, name="add-calendar"),
    path("connections/mailbox/", mailcal.add_mailbox, name="add-mailbox"),
    path("connections/<str:kind>/remove-account/", mailcal.remove, name="remove-account"),
    path("connections/oauth/callback/", views.oauth_callback, name="oauth-callback"),
    path("connections/<str:public_id>/sync/", views.sync, name="sync"),
    path("connections/<str:public_id>/sign-in/", views.sign_in_again, name="sign-in-again"),
    path("connections/<str:public_id>/remove/", views.remove, name="remove"),
]
