from django.apps import AppConfig


class AssistantConfig(AppConfig):
    name = "assistant"
    verbose_name = "Assistant"

    def ready(self) -> None:
        from assistant import checks, signals  # noqa: F401  (registers the system checks and the receivers)
