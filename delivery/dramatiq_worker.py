"""The Dramatiq worker's entry point when deliveries go through a broker (DELIVERY_BROKER_URL):

    dramatiq delivery.dramatiq_worker --processes 1 --threads 64 --worker-shutdown-timeout 20000

Sets Django up with a small database pool (the threads share a few connections), then declares the actor."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_POOL_SIZE", "4")

import django

django.setup()

from delivery.broker import broker, deliver  # noqa: E402

__all__ = ["broker", "deliver"]
