"""The thread's index gains the id, so that a page of a thread is read in the index's exact order
(conversations/models.py, Message.Meta). On PostgreSQL the new index is built CONCURRENTLY and the old one dropped
the same way: the messages table keeps taking writes while it is built."""

from django.db import migrations, models

OLD = models.Index(fields=["conversation", "created_at"], name="conversatio_convers_4b968d_idx")
NEW = models.Index(fields=["conversation", "created_at", "id"], name="message_thread_order")


def swap(apps, schema_editor, add=NEW, remove=OLD):
    message = apps.get_model("conversations", "Message")
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.add_index(message, add)
        schema_editor.remove_index(message, remove)
        return
    columns = ", ".join(f'"{message._meta.get_field(name).column}"' for name in add.fields)
    schema_editor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{add.name}" ON "{message._meta.db_table}" ({columns})')
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{remove.name}"')


def swap_back(apps, schema_editor):
    swap(apps, schema_editor, add=OLD, remove=NEW)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("conversations", "0010_processing_by_thread")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="message", name=OLD.name),
                migrations.AddIndex(model_name="message", index=NEW),
            ],
            database_operations=[migrations.RunPython(swap, swap_back)],
        )
    ]
