from django.urls import path

from console.views import thread as views

app_name = "conversations"

urlpatterns = [
    path("conversation/", views.thread, name="thread"),
    path("conversation/messages/", views.send, name="send"),
    path("conversation/updates/", views.updates, name="updates"),
    path("conversation/messages/<str:message_id>/", views.message_detail, name="message"),
]
