from django import forms
from django.contrib.auth.models import User

from connections import mailcal
from connections.models import Security


def _app_password() -> forms.CharField:
    return forms.CharField(
        label="App password",
        max_length=1024,
        strip=False,
        help_text=(
            "An app password is best (iCloud, Fastmail, Gmail make one for you); stored encrypted, never shown again."
        ),
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )


class CalendarForm(forms.Form):
    server_url = forms.CharField(
        label="CalDAV server URL",
        max_length=2000,
        help_text="e.g. https://caldav.icloud.com/, https://caldav.fastmail.com/ or your Nextcloud's …/remote.php/dav/",
        widget=forms.URLInput(attrs={"placeholder": "https://caldav.fastmail.com/", "autocomplete": "off"}),
    )
    username = forms.CharField(label="Username", max_length=255, widget=forms.TextInput(attrs={"autocomplete": "off"}))
    password = _app_password()
    context_name = "calendar_form"  # its name in the Connections page's context (console/views/mailcal.py)

    def connect(self, user: User) -> str:
        """Log in to the valid form's calendar and keep it; what to tell the person. Raises AccountRefused or
        ChecksBusy."""
        data = self.cleaned_data
        account = mailcal.add_calendar(user, data["server_url"], data["username"], data["password"])
        return f"Connected your calendar “{account.calendar_name}”."


class MailboxForm(forms.Form):
    address = forms.EmailField(label="Email address", max_length=254, help_text="Drafts and sent mail come from it.")
    username = forms.CharField(
        label="Username (optional)",
        required=False,
        max_length=255,
        help_text="Leave empty when it is the email address.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    password = _app_password()
    imap_host = forms.CharField(
        label="IMAP server", max_length=253, widget=forms.TextInput(attrs={"placeholder": "imap.example.com"})
    )
    imap_port = forms.IntegerField(label="IMAP port", min_value=1, max_value=65535, initial=993)
    imap_security = forms.ChoiceField(label="IMAP security", choices=Security.choices, initial=Security.SSL)
    smtp_host = forms.CharField(
        label="SMTP server", max_length=253, widget=forms.TextInput(attrs={"placeholder": "smtp.example.com"})
    )
    smtp_port = forms.IntegerField(label="SMTP port", min_value=1, max_value=65535, initial=465)
    smtp_security = forms.ChoiceField(label="SMTP security", choices=Security.choices, initial=Security.SSL)

    context_name = "mailbox_form"

    def connect(self, user: User) -> str:
        """Log in to the valid form's mailbox (IMAP and SMTP) and keep it; what to tell the person. Raises
        AccountRefused or ChecksBusy."""
        data = self.cleaned_data
        fields = {
            "address": data["address"],
            "username": data["username"] or data["address"],
            "password": data["password"],
            "imapHost": data["imap_host"],
            "imapPort": data["imap_port"],
            "imapSecurity": data["imap_security"],
            "smtpHost": data["smtp_host"],
            "smtpPort": data["smtp_port"],
            "smtpSecurity": data["smtp_security"],
        }  # under the names connections.mailcal.add_mailbox takes (the API's)
        account = mailcal.add_mailbox(user, fields)
        return f"Connected your mailbox {account.address}."
