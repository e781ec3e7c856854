from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from delivery.work import Runner


class ChannelsConfig(AppConfig):
    name = "channels"
    verbose_name = "Channels"

    def ready(self) -> None:
        from channels import checks  # noqa: F401  (registers the system checks)
        from channels.adapters import configured
        from channels.outbound.enqueue import enqueue
        from conversations import outbound
        from delivery import work

        # Messages written for the person (replies, reminders, follow-ups) are put in the outbox in their own
        # transaction (conversations/outbound.py), when a channel is configured at all.
        outbound.listen(enqueue, active=lambda: bool(configured()))
        # A request that ends unanswered (expired, withdrawn) loses its buttons on Telegram, as an answered one does.
        from assistant.approval.requests import request_ended
        from channels.approvals import mark_ended

        request_ended.connect(mark_ended, dispatch_uid="channels.approvals.mark_ended")
        # The worker (delivery/work.py) runs the outbox's sender beside the delivery engine.
        work.register("channels", _sender)


def _sender(concurrency: int | None) -> "Runner | None":
    """The outbox's sender, when a channel is configured (otherwise nothing is ever put in the outbox)."""
    from channels.adapters import configured
    from channels.outbound.sender import Sender

    return Sender(concurrency=concurrency) if configured() else None
