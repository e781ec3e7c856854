from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self) -> None:
        from accounts import login_limits, signals  # noqa: F401  (connects the receivers)
