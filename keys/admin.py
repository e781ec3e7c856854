from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from accounts import audit
from accounts.admin import SecretDigestAdmin
from keys.models import ApiKey
from keys.services import rename_key, revoke_key, validate_key_name


class CredentialAdmin[Credential: Model](SecretDigestAdmin[Credential]):
    """A credential (an API key, a webhook trigger), as staff see it: revoked, not deleted, so that what came through
    it keeps naming it; unchangeable once revoked."""

    noun: str  # in "Revoked 2 key(s)."
    list_select_related = ["owner"]
    actions = ["revoke_selected"]

    def revoke(self, credential: Credential) -> bool:
        raise NotImplementedError

    def has_change_permission(self, request: HttpRequest, obj: Credential | None = None) -> bool:
        if getattr(obj, "revoked_at", None) is not None:
            return False
        return super().has_change_permission(request, obj)

    @admin.action(description="Revoke selected %(verbose_name_plural)s", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[Credential]) -> None:
        revoked = sum(self.revoke(credential) for credential in queryset)
        self.message_user(request, f"Revoked {revoked} {self.noun}(s).", messages.SUCCESS)

    def get_actions(self, request: HttpRequest, action_location: Any = ActionLocation.CHANGE_LIST) -> dict[str, Any]:
        actions = super().get_actions(request, action_location=action_location)
        actions.pop("delete_selected", None)
        return actions


# A key as staff see it. They may rename it (and revoke it, an action), nothing else: what a key may do is its
# owner's choice (on the key's console page), and the rest is its history.
SHOWN = (
    "name",
    "hint",
    "owner",
    "generation",
    "test_mode",
    "scopes",
    "scopes_predate_choice",
    "created_at",
    "last_used_at",
    "expires_at",
    "revoked_at",
    "deliveries",
)


@admin.register(ApiKey)
class ApiKeyAdmin(CredentialAdmin[ApiKey]):
    secret_fields = frozenset({"digest"})
    noun = "key"
    list_display = [
        "name", "hint", "owner", "generation", "test_mode", "scopes", "created_at", "last_used_at", "revoked_at",
    ]  # fmt: skip
    list_filter = ["generation", "test_mode", ("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["name", "hint", "owner__email", "owner__username"]
    fields = SHOWN
    readonly_fields = [name for name in SHOWN if name != "name"]

    @admin.display(description="deliveries")
    def deliveries(self, obj: ApiKey) -> str:
        # By URL name: deliveries live in the thread's app, a floor above this one.
        url = reverse("admin:conversations_delivery_changelist") + f"?api_key={obj.pk}"
        return format_html('<a href="{}">Its deliveries, newest first</a>', url)

    def revoke(self, credential: ApiKey) -> bool:
        return revoke_key(credential, by=audit.ADMIN)

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "name":  # as typed on the console: no control or direction characters
            kwargs["validators"] = [validate_key_name]
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        # The name is all staff may change, and a rename goes in the owner's audit log like theirs do.
        if change and "name" in form.changed_data:
            stored = ApiKey.objects.get(pk=obj.pk)
            rename_key(stored, obj.name, by=audit.ADMIN)
