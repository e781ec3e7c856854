from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from keys.models import ToolAccess
from keys.scopes import CONSOLE_DEFAULT, Scope, parse
from keys.services import key_name_field


class NewKeyForm(forms.Form):
    name = key_name_field(
        label="Name",
        help_text="What the key is for, so you know which one to revoke later. For example “GitHub deploys”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    # The one-time token that makes resubmitting the same form (reload, Back, a double click) harmless.
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, autofocus: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if autofocus:
            self.fields["name"].widget.attrs["autofocus"] = True


def _scopes_field() -> forms.MultipleChoiceField:
    return forms.MultipleChoiceField(
        label="What this key may do",
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one thing the key may do."},
    )


# Choices of days; "" is never.
EXPIRY_CHOICES = [("", "Never"), ("7", "In 7 days"), ("30", "In 30 days"), ("90", "In 90 days"), ("365", "In a year")]
# Choices of hours the old secret keeps working after a roll.
OVERLAP_CHOICES = [
    ("0", "Not at all: the old secret stops now"),
    ("1", "1 hour"),
    ("24", "24 hours"),
    ("168", "7 days"),
]


class NewV2KeyForm(NewKeyForm):
    """Add API Key: a name, the key's scopes (by default what a script that sends messages needs) and an expiry."""

    scopes = _scopes_field()
    expires_in_days = forms.TypedChoiceField(
        label="Expires",
        choices=EXPIRY_CHOICES,
        coerce=int,
        empty_value=None,
        required=False,
        help_text="After this the key is refused (401 expired_api_key). A key for a one-off job need not outlive it.",
    )

    test_mode = forms.BooleanField(
        label="Test key",
        required=False,
        help_text=(
            "For trying an integration (CI, a new script): its messages are answered in its receipts, kept out of "
            "your conversation; no tool acts, nothing is texted to you and no approval is asked."
        ),
    )

    def expires_at(self) -> datetime | None:
        days = self.cleaned_data.get("expires_in_days")
        return None if days is None else timezone.now() + timedelta(days=days)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scopes"].initial = [scope.value for scope in Scope if scope in CONSOLE_DEFAULT]

    def chosen_scopes(self) -> frozenset[Scope]:
        return parse(self.cleaned_data["scopes"])


class RenameForm(forms.Form):
    name = key_name_field(label="Name", widget=forms.TextInput(attrs={"autocomplete": "off"}))


class RollForm(forms.Form):
    overlap_hours = forms.TypedChoiceField(
        label="How long the old secret keeps working",
        choices=OVERLAP_CHOICES,
        coerce=int,
        initial="24",
        help_text="Time to put the new secret wherever the old one is used.",
    )

    def overlap(self) -> timedelta:
        return timedelta(hours=self.cleaned_data["overlap_hours"])


class ToolPolicyForm(forms.Form):
    """On a key's page: what the assistant may do for the key's messages, and whether what changes things waits for
    the owner's approval."""

    tool_access = forms.ChoiceField(label="Tools for this key's messages", choices=ToolAccess.choices)
    allowed_tools = forms.MultipleChoiceField(
        label="The tools (when only listed ones)", required=False, widget=forms.CheckboxSelectMultiple
    )
    tools_need_approval = forms.BooleanField(
        label="Ask me before a tool changes anything",
        required=False,
        help_text="Sending mail, creating or cancelling reminders and events, any MCP tool not marked read-only.",
    )

    def __init__(self, *args: Any, tools: list[tuple[str, str]], **kwargs: Any) -> None:
        """`tools`: (name, what it does), shown as the name and its description (the name alone, twice, said
        nothing of what a tool does)."""
        super().__init__(*args, **kwargs)
        field = self.fields["allowed_tools"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(name, description or "(no description)") for name, description in tools]


class ScopesForm(forms.Form):
    """On a key's page: change what it may do."""

    scopes = _scopes_field()

    def chosen_scopes(self) -> frozenset[Scope]:
        return parse(self.cleaned_data["scopes"])
