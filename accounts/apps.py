from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self) -> None:
        from accounts import checks, signals  # noqa: F401  (registers the checks, connects the receivers)
