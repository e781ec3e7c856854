"""The hand-off task moved from conversations.tasks to delivery.tasks: tasks queued before the move name the old
path in their row, and would no longer import. They are pointed at the new one."""

from django.db import migrations

OLD = "conversations.tasks.deliver_message"
NEW = "delivery.tasks.deliver_message"


def repoint(old: str, new: str):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        DBTaskResult = apps.get_model("django_tasks_database", "DBTaskResult")
        DBTaskResult.objects.filter(task_path=old).update(task_path=new)

    return run


class Migration(migrations.Migration):
    dependencies = [("django_tasks_database", "0021_conditional_partial_index_ordering")]

    operations = [migrations.RunPython(repoint(OLD, NEW), repoint(NEW, OLD))]
