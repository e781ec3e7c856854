from django.urls import path

from console.views import audit as views

app_name = "audit"

urlpatterns = [
    path("settings/audit-log/", views.audit_log, name="log"),
]
