"""README.md is the front door: short, true, and every link in it leads somewhere in this repository."""

import re
import subprocess
from pathlib import Path

from myst_parser.slugs import github_slugify

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def headings_of(markdown: str) -> set[str]:
    """The anchors GitHub and MyST give a page's headings (code spans and links reduced to their text)."""
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6} (.+)$", line)):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).replace("`", "")
            anchors.add(github_slugify(text))
    return anchors


def local_links(markdown: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", markdown) + re.findall(r'<img src="([^"]+)"', markdown)
    return [link for link in links if not link.startswith(("http://", "https://", "mailto:"))]


def test_the_readme_is_a_front_door_of_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_the_readme_says_how_to_run_the_tests_and_what_the_machine_needs():
    assert "\n```sh\nmake test\n```\n" in README  # CI reads the test command from here
    for package in ("dovecot-imapd", "chromium", "nodejs npm", "iproute2"):
        assert f"`{package}`" in README, package


def test_every_link_in_the_readme_leads_to_a_file_and_heading_of_the_repository():
    """A clone has nothing beside it: every relative link and picture exists, and so does every #anchor."""
    assert "../" not in README
    broken = []
    for link in local_links(README):
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        if not target.exists() or (anchor and anchor not in headings_of(target.read_text())):
            broken.append(link)
    assert broken == []


def test_the_readme_maps_the_documentation_site():
    linked = {link.partition("#")[0] for link in local_links(README)}
    for section in ("tutorials", "howto", "reference", "explanation"):
        assert any(link.startswith(f"docs/{section}/") for link in linked), section
    assert {"docs/design.md", "docs/benchmarks.md"} <= linked


def test_make_run_serves_on_the_port_the_readme_says_how_to_change():
    """...and the port it suggests is not the documentation server's (make docs, DOCS_PORT)."""
    suggested = re.search(r"make run PORT=(\d+)", README)
    assert suggested is not None
    docs_port = re.search(r"^DOCS_PORT \?= (\d+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert docs_port is not None and suggested.group(1) != docs_port.group(1)
    dry_run = subprocess.run(
        ["make", "-n", "run", f"PORT={suggested.group(1)}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert f"manage.py serve 127.0.0.1:{suggested.group(1)}" in dry_run
    assert f"PUBLIC_BASE_URL=http://127.0.0.1:{suggested.group(1)}" in README  # for createapikey's link


def test_the_quick_start_shows_the_approval_a_keys_first_message_asks_for_and_where_to_give_it():
    """A key's message waits for the person's approval (assistant/approval/requests.py): the Quick start says so, in the
    words the console shows, and does not promise the reminder before it."""
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    approval = quick_start.index("Approve this?")
    assert "**Approve**" in quick_start and "**Conversation**" in quick_start
    assert approval < quick_start.index("listed under **Reminders**")
    from assistant.backends.local import approval_needed

    assert approval_needed("Remind you").split(" remind you")[0] in quick_start
