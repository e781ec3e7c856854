"""What a phone can show: markdown flattened to plain text, and a long text cut into parts a provider accepts.

Assistants answer in markdown; an SMS shows ``**`` and ``[label](url)`` as they are. Flattening keeps the words,
the list bullets and the addresses of links, and drops the markup. markdown-it-py parses it (CommonMark): a regex
misreads nested emphasis, code spans with asterisks in them and lists inside quotes.

Limits are counted in UTF-16 code units, as the providers count: an emoji outside the Basic Multilingual Plane is
two of them, so a text of 1,600 Python characters with emoji in it could still be too long for Twilio.
"""

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_PARSER = MarkdownIt("commonmark")
# Room kept at the end of each part for its number, " (12/34)": more parts than 99 are cut anyway (MAX_PARTS).
_NUMBER_ROOM = len(" (99/99)")
MAX_PARTS = 10
# Where a part may end, best first: between paragraphs, between lines, after a sentence, between words.
_BREAKS = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ")


def flatten_markdown(text: str) -> str:
    """Plain text for SMS and iMessage: the words, bullets as "•", numbered items as "1.", a link as
    "label (address)", code as it is written, a quote's lines starting with "> "."""
    root = SyntaxTreeNode(_PARSER.parse(text))
    blocks = [_block(node) for node in root.children]
    return "\n\n".join(block for block in blocks if block).strip()


def _block(node: SyntaxTreeNode) -> str:
    kind = node.type
    if kind in ("paragraph", "heading"):
        return "".join(_inline(child) for child in node.children)
    if kind in ("fence", "code_block"):
        return node.content.rstrip("\n")
    if kind in ("bullet_list", "ordered_list"):
        start = int(str(node.attrs.get("start", 1)))
        lines = []
        for number, item in enumerate(node.children, start=start):
            marker = f"{number}." if kind == "ordered_list" else "•"
            body = "\n".join(_block(child) for child in item.children).replace("\n", "\n   ")
            lines.append(f"{marker} {body}")
        return "\n".join(lines)
    if kind == "blockquote":
        inner = "\n\n".join(_block(child) for child in node.children)
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
    if kind == "hr":
        return "———"
    if kind == "html_block":
        return node.content.strip()
    return "".join(_block(child) for child in node.children)


def _inline(node: SyntaxTreeNode) -> str:
    kind = node.type
    if kind in ("text", "code_inline", "html_inline"):
        return node.content
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "image":
        label = "".join(_inline(child) for child in node.children)
        return f"{label} ({node.attrs.get('src', '')})".strip()
    label = "".join(_inline(child) for child in node.children)
    if kind == "link":
        href = str(node.attrs.get("href", ""))
        target = href.removeprefix("mailto:")
        return label if target in (label, "") else f"{label} ({href})"
    return label  # strong, em, inline: their words


def units(text: str) -> int:
    """The length a provider counts: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` units, cut where a reader expects a pause, each numbered " (k/n)" when
    there are several. Beyond MAX_PARTS parts the last one ends with "…": a phone is not the place for a report
    (the whole text stays in the thread)."""
    text = text.strip()
    if units(text) <= limit:
        return [text] if text else []
    room = limit - _NUMBER_ROOM
    parts: list[str] = []
    rest = text
    while rest and len(parts) < MAX_PARTS:
        if units(rest) <= room:
            parts.append(rest)
            rest = ""
            break
        head = _prefix_within(rest, room)
        cut = _best_break(head)
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        parts[-1] = _prefix_within(parts[-1], room - 1).rstrip() + "…"
    return [f"{part} ({number}/{len(parts)})" for number, part in enumerate(parts, start=1)]


def _prefix_within(text: str, limit: int) -> str:
    """The longest prefix of whole characters that fits in ``limit`` units."""
    used = 0
    for index, character in enumerate(text):
        used += 2 if ord(character) > 0xFFFF else 1
        if used > limit:
            return text[:index]
    return text


def _best_break(head: str) -> int:
    """Where to end a part that may hold ``head``: after the latest break of the best kind found in its second half
    (a part much shorter than the limit wastes a message), else at the limit itself."""
    for mark in _BREAKS:
        at = head.rfind(mark)
        if at >= len(head) // 2:
            return at + len(mark)
    return len(head)
