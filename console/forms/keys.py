from typing import Any

from django import forms

from keys.services import key_name_field


class NewKeyForm(forms.Form):
    name = key_name_field(
        label="Name",
        help_text="What the key is for, so you know which one to revoke later. For example “GitHub deploys”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    may_read_replies = forms.BooleanField(
        required=False,
        label="May read replies",
        help_text=(
            "Receipts read with this key (GET /api/v1/inbound/messages/{id}) include the assistant's reply. Leave it "
            "off unless the script needs the reply: the reply is meant for you, in your conversation."
        ),
    )
    # The one-time token that makes resubmitting the same form (reload, Back, a double click) harmless.
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, autofocus: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if autofocus:
            self.fields["name"].widget.attrs["autofocus"] = True


class ReplyPermissionForm(forms.Form):
    """On a key's page: turn "may read replies" on or off."""

    may_read_replies = forms.BooleanField(required=False)
