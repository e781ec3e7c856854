from django.apps import AppConfig


class DevicesConfig(AppConfig):
    name = "devices"
    verbose_name = "CLI log-ins"
