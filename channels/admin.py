"""The channels app's pages in Django's admin."""

from channels.outbound import admin as outbound_admin  # noqa: F401  (registers the outbox and quiet hours)
