"""Scopes replace "may read replies", and keys may expire. Every key that exists keeps what it could do before
scopes existed (replies:read where "may read replies" was on) and is marked so, for the console to say."""

from typing import Any

from django.db import migrations, models

# Frozen here, not imported: a migration must keep meaning what it meant when it was written.
_V2_BEFORE_SCOPES = ["messages:send", "receipts:read", "webhooks:manage", "connections:manage", "profile:read"]
_V1 = ["messages:send", "receipts:read", "profile:read"]
_ORDER = ["messages:send", "receipts:read", "replies:read", "webhooks:manage", "connections:manage", "profile:read"]


def _names(granted: list[str]) -> str:
    return " ".join(name for name in _ORDER if name in granted)


def grant_what_keys_could_do(apps: Any, schema_editor: Any) -> None:
    ApiKey = apps.get_model("keys", "ApiKey")
    for generation, base in (("v2", _V2_BEFORE_SCOPES), ("v1", _V1)):
        keys = ApiKey.objects.filter(generation=generation)
        keys.filter(may_read_replies=False).update(scopes=_names(base), scopes_predate_choice=True)
        keys.filter(may_read_replies=True).update(
            scopes=_names([*base, "replies:read"]), scopes_predate_choice=True
        )


def restore_reply_permission(apps: Any, schema_editor: Any) -> None:
    ApiKey = apps.get_model("keys", "ApiKey")
    ApiKey.objects.filter(scopes__contains="replies:read").update(may_read_replies=True)


class Migration(migrations.Migration):
    dependencies = [
        ("keys", "0002_apikey_may_read_replies"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="expires_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="scopes",
            field=models.CharField(blank=True, default="", editable=False, max_length=200),
        ),
        migrations.AddField(
            model_name="apikey",
            name="scopes_predate_choice",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(grant_what_keys_could_do, restore_reply_permission),
        migrations.RemoveField(
            model_name="apikey",
            name="may_read_replies",
        ),
    ]
