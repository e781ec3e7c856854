"""Pages whose facts come from the code, filled in when Sphinx reads them, so the site cannot drift from the code.

A page asks for a generated part with an HTML comment on a line of its own, ``<!-- generated: NAME -->``; the build
replaces that line with what GENERATORS[NAME] returns (Markdown). An unknown NAME fails the build.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)

# The error codes' texts (ops/errors.py) link to sections by their anchor alone, which is right inside one page and
# in the OpenAPI document; on the site each anchor lives on its own page.
ERROR_LINK_PAGES = {
    "mcp-connections": "../explanation/assistant-tools.md",
    "key-life-cycle": "../howto/keys-and-scopes.md",
    "scopes": "../howto/keys-and-scopes.md",
    "the-callback-endpoint": "../howto/assistant-backend.md",
    "webhook-triggers": "../howto/webhooks.md",
    "follow-ups": "../explanation/assistant-tools.md",
    "cli-log-in-poke-login": "cli-login.md",
    "rate-limits": "api.md",
}


def error_codes() -> str:
    from ops.errors import markdown_table

    def on_its_page(match: re.Match[str]) -> str:
        text, anchor = match.group(1), match.group(2)
        if anchor not in ERROR_LINK_PAGES:
            raise ExtensionError(f"ops/errors.py links to #{anchor}: add its page to ERROR_LINK_PAGES in {__file__}")
        return f"[{text}]({ERROR_LINK_PAGES[anchor]}#{anchor})"

    return re.sub(r"\[([^\]]+)\]\(#([a-z0-9-]+)\)", on_its_page, markdown_table())


GENERATORS: dict[str, Callable[[], str]] = {
    "error-codes": error_codes,
}


def fill_in(app: Sphinx, docname: str, source: list[str]) -> None:
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ExtensionError(f"{docname}: no generator named {name!r} (docs/_ext/generated_pages.py)")
        return GENERATORS[name]()

    source[0] = MARKER.sub(generate, source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", fill_in)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
