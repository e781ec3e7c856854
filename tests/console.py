"""Helpers for the console's page tests (Django's test client, a signed-in user)."""

import re

from django.test import Client

# What Add API Key's form sends when the person leaves its scopes as they are (a list: one checkbox each).
DEFAULT_SCOPES = {"scopes": ["messages:send", "receipts:read"]}

_NONCE = re.compile(r'name="nonce" value="([^"]+)"')


def form_nonce(client: Client, path: str) -> str:
    """The one-time token of the key form on the page at path."""
    page = client.get(path)
    assert page.status_code == 200
    match = _NONCE.search(page.content.decode())
    assert match, "the page has no key form"
    return match.group(1)


def secret_on(page) -> str:
    """The plaintext key shown in the page's secret box."""
    match = re.search(r'id="secret" type="text" value="([^"]+)"', page.content.decode())
    assert match, "the page shows no secret"
    return match.group(1)
