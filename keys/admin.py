from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import Field, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from accounts import audit
from keys.models import ApiKey
from keys.services import rename_key, revoke_key, validate_key_name

# A key as staff see it. They may rename it (and revoke it, an action), nothing else: what a key may do is its
# owner's choice (on the key's console page), and the rest is its history.
SHOWN = (
    "name",
    "hint",
    "owner",
    "generation",
    "scopes",
    "scopes_predate_choice",
    "created_at",
    "last_used_at",
    "expires_at",
    "revoked_at",
    "deliveries",
)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    # The digest is never shown: it is all an attacker with admin access would need to test guessed keys offline.
    list_display = [
        "name",
        "hint",
        "owner",
        "generation",
        "scopes",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["generation", ("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["name", "hint", "owner__email", "owner__username"]
    fields = SHOWN
    readonly_fields = [name for name in SHOWN if name != "name"]
    list_select_related = ["owner"]
    actions = ["revoke_selected"]

    @admin.display(description="deliveries")
    def deliveries(self, obj: ApiKey) -> str:
        # By URL name: deliveries live in the thread's app, a floor above this one.
        url = reverse("admin:conversations_delivery_changelist") + f"?api_key={obj.pk}"
        return format_html('<a href="{}">Its deliveries, newest first</a>', url)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # The list takes any lookup on the key's own fields from the query string: with the digest among them,
        # counting the rows that match ?digest__startswith=<guess> would read it out one character at a time.
        if "digest" in lookup.split(LOOKUP_SEP):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A new secret must be shown once and never stored, which the admin cannot promise (its messages live in
        # cookies or sessions). Keys are created in the console or with `manage.py createapikey`.
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        if obj is not None and obj.is_revoked:
            return False
        return super().has_change_permission(request, obj)

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "name":  # as typed on the console: no control or direction characters
            kwargs["validators"] = [validate_key_name]
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        # The name is all staff may change, and a rename goes in the owner's audit log like theirs do.
        if change and "name" in form.changed_data:
            stored = ApiKey.objects.get(pk=obj.pk)
            rename_key(stored, obj.name, by=audit.ADMIN)

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = sum(revoke_key(key, by=audit.ADMIN) for key in queryset)
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)

    def get_actions(self, request: HttpRequest, action_location: Any = ActionLocation.CHANGE_LIST) -> dict[str, Any]:
        actions = super().get_actions(request, action_location=action_location)
        actions.pop("delete_selected", None)  # keys are revoked, not deleted, so deliveries keep their key
        return actions
