"""Profiles and the audit log in Django's admin, and the rules other apps' admin pages share: rows the app writes
that staff only read (``Unchangeable``, ``ReadOnly``), and rows holding a secret's digest (``SecretDigestAdmin``)."""

from typing import Any

from django.contrib import admin
from django.db.models import Model, Q
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from accounts.models import AuditEvent, Profile
from ops.admin_lists import LargeTableAdmin, people_with_email


class Unchangeable:
    """For a ModelAdmin of rows the app writes: staff neither add nor change one (deleting stays as the admin
    allows)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnly(Unchangeable):
    """Nor delete one: a log that staff could edit would prove nothing."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SecretDigestAdmin[Row: Model](admin.ModelAdmin[Row]):
    """Rows that hold a secret's digest (``secret_fields``), never added here: the secret must be shown once and
    never stored, which the admin cannot promise (its messages live in cookies or sessions). The digest is neither
    shown nor filterable: the list takes any lookup on the model's own fields from the query string, and counting
    the rows that match ?digest__startswith=<guess> would read a digest out one character at a time (and a digest is
    all an attacker with admin access would need to test guessed secrets offline)."""

    secret_fields: frozenset[str]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if self.secret_fields & set(lookup.split(LOOKUP_SEP)):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "phone_number", "channel"]
    list_filter = ["channel"]
    search_fields = ["user__email", "phone_number"]
    raw_id_fields = ["user"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnly, LargeTableAdmin):
    """Read-only: an audit log that staff could edit would prove nothing. Newest first through the index on ``at``."""

    list_display = ["at", "account", "kind", "summary", "actor"]
    search_fields = ["account__email"]
    search_help_text = "The exact email of the account."
    list_select_related = ["account"]
    ordering = ("-at", "-id")
    fields = ["at", "account", "kind", "summary", "actor"]
    readonly_fields = ["at", "account", "kind", "summary", "actor"]

    def search_condition(self, term: str) -> Q:
        return Q(account_id__in=people_with_email(term))
