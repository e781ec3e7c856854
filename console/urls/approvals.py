from django.urls import path

from console.views import approvals as views

app_name = "approvals"

urlpatterns = [
    path("conversation/approvals/<int:pk>/", views.approval, name="detail"),
]
