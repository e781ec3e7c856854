from django.urls import path

from console.views import reminders as views

app_name = "reminders"

urlpatterns = [
    path("reminders/", views.reminder_list, name="list"),
    path("reminders/<str:public_id>/cancel/", views.cancel, name="cancel"),
]
