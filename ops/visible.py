"""Text as it will look: control and format characters shown, never obeyed (docs/explanation/approval.md).

A right-to-left override (U+202E) makes "gpj.exe" read as "exe.jpg"; zero-width and tag characters hide words from
the eye that a model or a machine still reads. Wherever a name or a text from someone else is shown (the console's
pages and the Django admin through ``VisibleTextMiddleware``, texts to phones, approval requests) such a character is
replaced by its code point in brackets ("[U+202E]"); where a person names something (a key, a connection, a webhook
trigger) it is refused (``refusal``).

Kept: line breaks and tabs, and the zero-width joiner and non-joiner, which join emoji and Persian letters and cannot
reorder or hide anything."""

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

KEPT = frozenset("\n\r\t\u200c\u200d")
# Every control (Cc) and format (Cf) character of Unicode 15.1 but the kept ones, and the line and paragraph
# separators (U+2028, U+2029), which some displays break a line at and others ignore. Written out, because finding
# them in unicodedata takes seconds; tests/test_approval_text.py checks the list against the running Python's.
RANGES = (
    (0x0, 0x8), (0xB, 0xC), (0xE, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
    (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200B), (0x200E, 0x200F),
    (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip
_PATTERN = re.compile("[" + "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in RANGES) + "]")


def _shown(found: re.Match[str]) -> str:
    return f"[U+{ord(found.group()):04X}]"


def visible(text: str) -> str:
    """The text with every control and format character (bar the kept ones) replaced by "[U+XXXX]"."""
    return _PATTERN.sub(_shown, text)


def without_hidden(text: str) -> str:
    """The text with those characters dropped: for a name nobody typed (a client's User-Agent)."""
    return _PATTERN.sub("", text)


def hidden_characters(text: str) -> list[str]:
    """The code points ("U+202E") of the characters ``visible`` would show, in order, once each."""
    return list(dict.fromkeys(_shown(found)[1:-1] for found in _PATTERN.finditer(text)))


def refusal(field: str, text: str) -> str | None:
    """The sentence refusing a name with such characters in it, or None when it has none."""
    found = hidden_characters(text)
    if not found:
        return None
    return (
        f"{field} contains invisible control or direction characters ({', '.join(found[:5])}), which can make it "
        "look like something else: type it without them."
    )


class VisibleTextMiddleware:
    """HTML pages (the console, the Django admin) show control and format characters instead of obeying them, in
    whatever template or field they came from. API answers (JSON) are left as they are: their bytes are the
    contract."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
            return response
        charset = response.charset or "utf-8"
        page = response.content.decode(charset, errors="replace")
        shown = visible(page)
        if shown != page:
            response.content = shown.encode(charset)
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        return response
