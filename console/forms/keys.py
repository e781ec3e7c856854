from typing import Any

from django import forms

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


class NewV2KeyForm(NewKeyForm):
    """Add API Key: a name and the key's scopes (by default what a script that sends messages needs)."""

    scopes = _scopes_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scopes"].initial = [scope.value for scope in Scope if scope in CONSOLE_DEFAULT]

    def chosen_scopes(self) -> frozenset[Scope]:
        return parse(self.cleaned_data["scopes"])


class ScopesForm(forms.Form):
    """On a key's page: change what it may do."""

    scopes = _scopes_field()

    def chosen_scopes(self) -> frozenset[Scope]:
        return parse(self.cleaned_data["scopes"])
