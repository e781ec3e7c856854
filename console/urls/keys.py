from django.urls import path

from console.views import keys as views

app_name = "keys"

urlpatterns = [
    path("keys/", views.key_list, name="list"),
    path("keys/new/", views.new_key, name="new"),
    path("keys/<int:pk>/", views.key_detail, name="detail"),
    path("keys/<int:pk>/scopes/", views.key_scopes, name="scopes"),
    path("keys/<int:pk>/rename/", views.rename, name="rename"),
    path("keys/<int:pk>/tools/", views.tool_policy, name="tools"),
    path("keys/<int:pk>/roll/", views.roll, name="roll"),
    path("keys/<int:pk>/test-message/", views.send_test_message, name="test-message"),
    path("keys/<int:pk>/revoke/", views.revoke, name="revoke"),
    path("settings/advanced/", views.advanced, name="advanced"),
    path("settings/advanced/legacy-key/", views.new_legacy_key, name="new-legacy"),
]
