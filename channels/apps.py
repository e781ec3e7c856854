from django.apps import AppConfig


class ChannelsConfig(AppConfig):
    name = "channels"
    verbose_name = "Channels"

    def ready(self) -> None:
        from channels import checks  # noqa: F401  (registers the system checks)
