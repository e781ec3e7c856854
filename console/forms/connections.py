from typing import Any

from django import forms


class ConnectionForm(forms.Form):
    """An MCP server to add. Its fields' ids start with mcp_: the same page's calendar form has a server_url too, and
    two inputs with one id would give the label "Server URL" to the calendar's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "mcp_%s")
        super().__init__(*args, **kwargs)

    name = forms.CharField(label="Name", max_length=100, help_text="How you and the assistant call it, e.g. Tracker.")
    server_url = forms.CharField(
        label="Server URL",
        max_length=2000,
        help_text="The MCP server's Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp.",
        widget=forms.URLInput(attrs={"placeholder": "https://mcp.example.com/mcp", "autocomplete": "off"}),
    )
    api_key = forms.CharField(
        label="API key (optional)",
        required=False,
        max_length=4096,
        strip=True,
        help_text="Sent to the server as a Bearer token; stored encrypted and never shown again.",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
    )
    oauth_client_id = forms.CharField(
        label="OAuth client ID (optional)",
        required=False,
        max_length=2000,
        strip=True,
        help_text="Only for a server that signs in with OAuth but does not register apps itself: the client its "
        "developer console gave you.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    oauth_client_secret = forms.CharField(
        label="OAuth client secret (optional)",
        required=False,
        max_length=2000,
        strip=True,
        help_text="That client's secret, if it has one; stored encrypted and never shown again.",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
    )
