from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from delivery.work import Runner


class DeliveryConfig(AppConfig):
    name = "delivery"
    verbose_name = "Assistant hand-off"

    def ready(self) -> None:
        from delivery import metrics, work
        from ops import exposition

        exposition.count_in_database(metrics.DeliveriesByStatus())
        work.register("deliveries", _delivery_engine)


def _delivery_engine(concurrency: int | None) -> "Runner | None":
    """The delivery engine, when deliveries wait in the database (the database task backend)."""
    from delivery.engine import Engine
    from delivery.tasks import queued_in_database

    return Engine(concurrency=concurrency) if queued_in_database() else None
