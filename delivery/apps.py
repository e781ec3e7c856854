from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    name = "delivery"
    verbose_name = "Assistant hand-off"

    def ready(self) -> None:
        from delivery import metrics
        from ops import exposition

        exposition.count_in_database(metrics.DeliveriesByStatus())
