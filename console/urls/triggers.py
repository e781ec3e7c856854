from django.urls import path

from console.views import triggers as views

app_name = "triggers"

urlpatterns = [
    path("webhooks/", views.trigger_list, name="list"),
    path("webhooks/new/", views.new_trigger, name="new"),
    path("webhooks/<int:pk>/log/", views.firing_log, name="log"),
    path("webhooks/<int:pk>/revoke/", views.revoke, name="revoke"),
]
