from django.urls import re_path

from assistant import views

urlpatterns = [
    re_path(r"^api/v1/assistant/replies/?$", views.AssistantReplyView.as_view(), name="assistant-replies"),
]
