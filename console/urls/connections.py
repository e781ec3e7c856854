from django.urls import path

from console.views import connections as views

app_name = "connections"

urlpatterns = [
    path("connections/", views.connection_list, name="list"),
    path("connections/<str:public_id>/sync/", views.sync, name="sync"),
    path("connections/<str:public_id>/remove/", views.remove, name="remove"),
]
