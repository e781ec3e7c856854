from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self) -> None:
        from conversations import signals  # noqa: F401  (connects the receivers)
