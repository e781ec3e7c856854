"""Security headers on every response, and a Content Security Policy the admin works under."""

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


def csp_nonce(response) -> str | None:
    """The nonce the policy allows (Django puts one in only when the page used it)."""
    match = re.search(r"script-src 'self' 'nonce-([^']+)'", response["Content-Security-Policy"])
    return match.group(1) if match else None


class InlineCode(HTMLParser):
    """Collects what a strict CSP would block: inline <script>/<style> without the right nonce, style="" and on*=
    attributes."""

    def __init__(self, nonce: str | None) -> None:
        super().__init__()
        self.nonce = nonce
        self.blocked: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        nonced = self.nonce is not None and attributes.get("nonce") == self.nonce
        if tag in ("script", "style") and "src" not in attributes and not nonced:
            self.blocked.append(f"<{tag}> without the nonce")
        if tag == "link" and attributes.get("rel") == "stylesheet" and not attributes.get("href", "").startswith("/"):
            self.blocked.append(f"stylesheet from elsewhere: {attributes.get('href')}")
        for name in attributes:
            if name == "style" or name.startswith("on"):
                self.blocked.append(f"<{tag} {name}=...>")


def test_api_responses_carry_the_security_headers(client):
    response = post(client, CURRENT, "psk_notakey", {"message": "hi"})

    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "object-src 'none'" in policy


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    return client


@pytest.mark.parametrize(
    "page",
    [
        "/admin/",
        "/admin/keys/apikey/",
        "/admin/conversations/delivery/",
        "/admin/conversations/message/",
        "/admin/auth/user/",
        "/admin/auth/user/add/",
        "/admin/auth/user/{pk}/change/",
        "/admin/auth/user/{pk}/password/",
        "/admin/auth/user/{pk}/delete/",
    ],
)
def test_admin_pages_need_nothing_the_policy_blocks(staff_client, page):
    response = staff_client.get(page.format(pk=get_user_model().objects.get().pk))
    assert response.status_code == 200

    parser = InlineCode(csp_nonce(response))
    parser.feed(response.content.decode())

    assert parser.blocked == []


@pytest.mark.parametrize("page", ["/admin/login/", "/api/docs/"])
def test_public_pages_need_nothing_the_policy_blocks(client, page):
    response = client.get(page)
    assert response.status_code == 200

    parser = InlineCode(csp_nonce(response))
    parser.feed(response.content.decode())

    assert parser.blocked == []


def test_the_api_docs_script_comes_from_this_origin(client):
    page = client.get("/api/docs/").content.decode()
    [script_url] = re.findall(r'<script src="(/api/docs/\?[^"]+)"', page)

    script = client.get(script_url.replace("&amp;", "&"))

    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle" in script.content


def test_the_checker_notices_inline_code_without_the_nonce():
    parser = InlineCode("abc")
    parser.feed('<script>alert(1)</script><style nonce="abc">p{}</style><p style="color:red" onclick="x()">')
    assert parser.blocked == ["<script> without the nonce", "<p style=...>", "<p onclick=...>"]
    parser = InlineCode(None)
    parser.feed('<style nonce="">p{}</style>')
    assert parser.blocked == ["<style> without the nonce"]


@override_settings(SECURE_SSL_REDIRECT=True, SECURE_HSTS_SECONDS=31536000)
def test_behind_the_router_https_is_recognised_and_plain_http_redirected(client):
    plain = post(client, CURRENT, "psk_notakey", {"message": "hi"})
    assert plain.status_code == 301
    assert plain["Location"] == f"https://testserver{CURRENT}"

    forwarded = post(client, CURRENT, "psk_notakey", {"message": "hi"}, **{"X-Forwarded-Proto": "https"})
    assert forwarded.status_code == 401
    assert forwarded["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
