from django.apps import AppConfig


class ChannelsConfig(AppConfig):
    name = "channels"
    verbose_name = "Channels"

    def ready(self) -> None:
        from channels import checks  # noqa: F401  (registers the system checks)
        from channels.adapters import configured
        from channels.outbound.enqueue import enqueue
        from conversations import outbound

        # Messages written for the person (replies, reminders, follow-ups) are put in the outbox in their own
        # transaction (conversations/outbound.py), when a channel is configured at all.
        outbound.listen(enqueue, active=lambda: bool(configured()))
