from django.apps import AppConfig


class AssistantConfig(AppConfig):
    name = "assistant"
    verbose_name = "Assistant hand-off"

    def ready(self) -> None:
        from assistant import checks  # noqa: F401  (registers the system checks)
