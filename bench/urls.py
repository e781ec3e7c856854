from django.urls import path

from bench.views import baseline
from config.urls import handler404, handler500
from config.urls import urlpatterns as service_urlpatterns

urlpatterns = [path("bench/baseline", baseline), *service_urlpatterns]

__all__ = ["handler404", "handler500", "urlpatterns"]
