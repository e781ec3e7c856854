from django import forms


class ConnectionForm(forms.Form):
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
