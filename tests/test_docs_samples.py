"""The documentation's samples run as written: every fenced block marked `<!-- runnable -->` in docs/ is run with
bash against a live server, in the order of its page, and what it prints must hold every member its `# {...}`
comment promises. A sample that stops working fails here, not in a reader's terminal.

A runnable block may use `$KEY` (a V2 key with every scope), `.venv/bin/python`, curl and files it writes itself in
its working directory; `http://127.0.0.1:8000` is replaced by the live server's address."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keys.scopes import Scope
from tests.factories import UserFactory, make_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (apt-get install curl)"),
]

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- runnable -->"
BLOCK = re.compile(r"^<!-- runnable -->\n```(?:sh|bash|console)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def runnable_blocks(page: Path) -> list[str]:
    text = page.read_text()
    blocks = BLOCK.findall(text)
    markers = sum(line == MARKER for line in text.splitlines())
    assert len(blocks) == markers, f"{page}: {MARKER} must sit on its own line right above a ```sh block"
    return blocks


PAGES = sorted(
    page
    for page in (ROOT / "docs").rglob("*.md")
    if "_build" not in page.parts and MARKER in page.read_text().splitlines()
)


# A member whose value is made anew each time (an id, a token): its presence is checked, not its value.
MEMBER = re.compile(r"""(["'][A-Za-z_]+["']\s*:\s*)(["'][^"'…]*["']|true|false|True|False|-?\d+)""")
FRESH = re.compile(r"""^["'](msg|trg|pwh|pws|psk)_""")


def promised(block: str) -> list[str]:
    """The members a block's `# {...}` comments promise, as they print without spaces; those with … are left out,
    and a fresh id or token is promised by its name alone."""
    members = []
    for comment in re.findall(r"^# ([{\[].*)$", block, flags=re.MULTILINE):
        for name, value in MEMBER.findall(comment):
            members.append(re.sub(r"\s", "", name if FRESH.match(value) else name + value))
    return members


def test_some_pages_carry_runnable_samples():
    assert ROOT / "docs" / "tutorials" / "first-message.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT / "docs")))
def test_the_pages_runnable_samples_work_against_a_live_server(page, live_server, tmp_path):
    _, key = make_key(UserFactory(), "docs samples", scopes=set(Scope))
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the samples call .venv/bin/python, as from a clone
    environment = {**os.environ, "KEY": key, "HOME": str(tmp_path)}
    for block in runnable_blocks(page):
        script = block.replace("http://127.0.0.1:8000", live_server.url)
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"{page.name}:\n{block}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        printed = re.sub(r"\s", "", result.stdout)
        for member in promised(block):
            assert member in printed, f"{page.name}: {member} is not in what\n{block}\nprinted: {result.stdout}"
