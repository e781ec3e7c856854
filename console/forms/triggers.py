from typing import Any

from django import forms

from triggers.models import ACTION_MAX_LENGTH, CONDITION_MAX_LENGTH
from triggers.services import InvalidTrigger, clean_action, clean_condition


class NewTriggerForm(forms.Form):
    condition = forms.CharField(
        label="When",
        max_length=CONDITION_MAX_LENGTH,
        help_text="What happened elsewhere, for example “A deploy of the shop fails” or “A new order is placed”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    action = forms.CharField(
        label="Then my assistant should",
        max_length=ACTION_MAX_LENGTH,
        help_text="Your instruction, as you would type it, for example “Tell me which commit broke it”.",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    signed = forms.BooleanField(
        label="Also accept signed requests (GitHub)",
        required=False,
        help_text="For senders that cannot set an Authorization header: adds a signing secret for "
        "X-Hub-Signature-256, shown once with the token.",
    )
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["condition"].widget.attrs["autofocus"] = True

    def _checked(self, name: str, clean: Any) -> str:
        try:
            return str(clean(self.cleaned_data[name]))
        except InvalidTrigger as error:
            raise forms.ValidationError(str(error).replace(f"'{name}'", "This")) from None

    def clean_condition(self) -> str:
        return self._checked("condition", clean_condition)

    def clean_action(self) -> str:
        return self._checked("action", clean_action)
