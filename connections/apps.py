from django.apps import AppConfig


class ConnectionsConfig(AppConfig):
    name = "connections"
    verbose_name = "MCP connections"
