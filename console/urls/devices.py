from django.urls import re_path

from console.views import devices as views

app_name = "devices"

# /device, without the slash, is what the poke CLI opens ({POKE_FRONTEND}/device).
urlpatterns = [re_path(r"^device/?$", views.device, name="approve")]
