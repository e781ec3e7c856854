from typing import Any

from django import forms

from channels.adapters import configured
from channels.adapters.base import PHONE_CHANNELS
from channels.models import ChannelKind
from console.forms.accounts import PhoneNumberField, PhoneRegionsMixin


class PhoneLinkForm(PhoneRegionsMixin, forms.Form):
    """A number to link on one of the phone channels this server offers."""

    channel = forms.ChoiceField(label="Channel", widget=forms.RadioSelect)
    phone_number = PhoneNumberField(help_text="")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        offered = [c for c in configured() if c in PHONE_CHANNELS]
        field = self.fields["channel"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(c, ChannelKind(c).label) for c in offered]
        if len(offered) == 1:
            field.initial = offered[0]


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code",
        max_length=12,
        help_text="The 6 digits we just sent.",
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9 ]*", "autofocus": True}
        ),
    )


class QuietHoursForm(forms.Form):
    """A span of the person's day when nothing is sent to their phone; both empty: none."""

    starts = forms.TimeField(label="From", required=False, widget=forms.TimeInput(attrs={"type": "time"}))
    ends = forms.TimeField(label="Until", required=False, widget=forms.TimeInput(attrs={"type": "time"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        starts, ends = data.get("starts"), data.get("ends")
        if (starts is None) != (ends is None) and not self.errors:
            raise forms.ValidationError("Give both times, or neither to have no quiet hours.")
        if starts is not None and starts == ends:
            raise forms.ValidationError("The two times are the same: give a span, or neither time.")
        return data
