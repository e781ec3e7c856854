from typing import Any

from django import forms

from keys.models import ApiKey


class NewKeyForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=ApiKey._meta.get_field("name").max_length,
        help_text="What the key is for, so you know which one to revoke later. For example “GitHub deploys”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        error_messages={"required": "Give the key a name, for example the automation it is for."},
    )
    # The one-time token that makes resubmitting the same form (reload, Back, a double click) harmless.
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, autofocus: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if autofocus:
            self.fields["name"].widget.attrs["autofocus"] = True
