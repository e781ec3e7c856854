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
    assert "make run PORT=8001" in README
    dry_run = subprocess.run(
        ["make", "-n", "run", "PORT=8123"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "manage.py serve 127.0.0.1:8123" in dry_run
