from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.forms import AuthenticationForm

from accounts import phones
from accounts.models import Channel
from accounts.services import find_user_by_email
from accounts.validators import canonical_time_zone, validate_e164, validate_time_zone


class TelInput(forms.TextInput):
    input_type = "tel"  # one type attribute (attrs["type"] on a TextInput would render a second one)


class PhoneNumberField(forms.CharField):
    """A phone number typed any way, cleaned to E.164 (accounts/phones.py). `regions` are the readings tried for a
    number without its country code, the browser's first; the form sets them (PhoneRegionsMixin)."""

    default_validators = [validate_e164]

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 32)
        kwargs.setdefault("label", "Phone number")
        kwargs.setdefault("widget", TelInput(attrs={"autocomplete": "tel", "inputmode": "tel"}))
        super().__init__(**kwargs)
        self.regions: list[str] = []

    def set_regions(self, regions: list[str]) -> None:
        self.regions = list(dict.fromkeys([*regions, settings.PHONE_DEFAULT_REGION]))
        home = self.regions[0]
        self.help_text = f"With the country code (+44 20 7946 0958), or as dialled in {home} ({phones.example(home)})."

    def to_python(self, value: Any) -> str:
        typed = super().to_python(value) or ""
        return phones.to_e164(typed, self.regions or [settings.PHONE_DEFAULT_REGION]) if typed else ""


class PhoneRegionsMixin:
    """`phone_regions=`: the regions the browser names (console.views.accounts reads its Accept-Language)."""

    fields: dict[str, forms.Field]

    def __init__(self, *args: Any, phone_regions: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["phone_number"]
        assert isinstance(field, PhoneNumberField)
        field.set_regions(phone_regions or [])


# Telegram is chosen at sign-up only: it links a chat, not a number, and the profile's channel (what the legacy
# endpoint reports) takes the spec's three values alone (docs: reference, "legacy endpoint").
TELEGRAM = "telegram"


class ChannelField(forms.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("choices", Channel.choices)
        kwargs.setdefault("label", "Preferred channel")
        kwargs.setdefault("help_text", "Where your assistant reaches you.")
        kwargs.setdefault("widget", forms.RadioSelect)
        super().__init__(**kwargs)


class SignUpForm(PhoneRegionsMixin, forms.Form):
    email = forms.EmailField(
        label="Email", max_length=150, widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True})
    )
    password1 = forms.CharField(
        label="Password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters; not a common password and not all digits.",
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    phone_number = PhoneNumberField(required=False, help_text="Needed for SMS, WhatsApp and iMessage.")
    channel = ChannelField(initial=Channel.SMS)

    def __init__(self, *args: Any, telegram: bool = False, **kwargs: Any) -> None:
        """`telegram`: the server has a Telegram bot, so a person may choose it (they link their chat right after)."""
        super().__init__(*args, **kwargs)
        if telegram:
            channel = self.fields["channel"]
            assert isinstance(channel, ChannelField)
            channel.choices = [*Channel.choices, (TELEGRAM, "Telegram")]

    def clean_email(self) -> str:
        email: str = self.cleaned_data["email"]
        # With sign-ups confirmed by email, the page must not tell whether an address has an account: the email
        # says it (console/signup_confirmation.py).
        if not settings.SIGNUP_EMAIL_CONFIRMATION and find_user_by_email(email) is not None:
            raise forms.ValidationError(
                "An account with this email already exists. Log in instead (one made with createapikey has no "
                "password until you open the link that command printed, or use “Forgot your password?”).",
                code="taken",
            )
        return email

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        needs_number = cleaned.get("channel") not in (None, TELEGRAM)
        if needs_number and not cleaned.get("phone_number") and "phone_number" not in self.errors:
            self.add_error("phone_number", "Type the number your assistant should text, or choose Telegram.")
        first, second = cleaned.get("password1"), cleaned.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ. Type the same password twice.")
        elif first:
            # The similarity check needs the account the password is for, which does not exist yet.
            candidate = get_user_model()(username=cleaned.get("email", ""), email=cleaned.get("email", ""))
            try:
                password_validation.validate_password(first, candidate)
            except forms.ValidationError as error:
                self.add_error("password1", error)
        return cleaned


TIME_ZONE_LIST = "time-zone-names"


class TimeZoneField(forms.CharField):
    """An IANA time zone name typed in any case, cleaned to the name itself (europe/paris: Europe/Paris)."""

    default_validators = [validate_time_zone]

    def to_python(self, value: Any) -> str:
        typed = super().to_python(value)
        return canonical_time_zone(typed) if typed else ""


class ContactForm(PhoneRegionsMixin, forms.Form):
    phone_number = PhoneNumberField()
    channel = ChannelField()
    time_zone = TimeZoneField(
        label="Time zone",
        max_length=64,
        required=False,
        help_text="Where you are, for reminders and the times on these pages: a name such as Europe/Paris or "
        "America/New_York, in any case.",
        # The page lists every name in the datalist TIME_ZONE_LIST; console.js offers the browser's own zone.
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "placeholder": "UTC", "list": TIME_ZONE_LIST, "data-browser-time-zone": ""}
        ),
    )


class EmailAuthenticationForm(AuthenticationForm):
    """Log in with the email address, whatever its capitalisation (the username is the email as first typed)."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That email and password do not match an account. Check both and try again.",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"] = forms.EmailField(
            label="Email", max_length=150, widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True})
        )

    def clean(self) -> dict[str, Any]:
        email = self.cleaned_data.get("username")
        if email:
            user = find_user_by_email(email)
            if user is not None:
                self.cleaned_data["username"] = user.get_username()
        return super().clean()


class DeleteAccountForm(forms.Form):
    """Deleting an account asks for its password: a console left open is not enough."""

    password = forms.CharField(widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}))

    def __init__(self, person: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.person = person

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.person.check_password(password):
            raise forms.ValidationError("That is not your password.")
        return password
