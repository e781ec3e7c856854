"""``manage.py db_worker``: the name the Procfile's worker had before it ran every kind of background work; the same
command as ``manage.py worker`` (delivery/management/commands/worker.py), kept so that a deployment's existing
Procfile or service file goes on working."""

from delivery.management.commands.worker import Command as Worker


class Command(Worker):
    pass
