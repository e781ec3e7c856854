"""Truthful references: every repository path that the docs, the code, the tests and the build files cite (such as
docs/explanation/delivery.md, ops/preload.py or tests/test_layout.py) names a file or folder that exists."""

import re
import subprocess

from tests.live_stack import ROOT

# What may cite a path: prose, code, templates and build files (not data: JSON fixtures, lock files). Not the
# URLconfs, whose "keys/new" and "connections/oauth/client.json" are routes.
_CITING = re.compile(r"(\.(py|md|html|txt|toml|cfg|ini|yml|yaml|sh|js|css|lua)|^Makefile|^Procfile)$")
_ROUTES = re.compile(r"(^|/)urls(/[\w.]+|\.py)$")
# A template is cited by its name under templates/ ("keys/list.html"); the docs' build output is made by the build.
_ALSO_UNDER = ("", "templates/")
_BUILT = {"docs/_build"}
_EXTENSIONS = "py|md|html|txt|toml|cfg|ini|yml|yaml|sh|js|css|lua|json|csv|svg|png|lock"


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return listed.split()


def _citation_pattern(tracked: list[str]) -> re.Pattern[str]:
    """A path that starts at the repository's root: one of its top-level folders, then names down to a file with an
    extension or a folder ending in '/'; or one of its top-level files. Not a piece of a longer path or URL."""
    folders = sorted({name.split("/", 1)[0] for name in tracked if "/" in name and not name.startswith(".")})
    files = sorted(re.escape(name) for name in tracked if "/" not in name and not name.startswith("."))
    in_folder = rf"(?:{'|'.join(folders)})/(?:[\w.-]+/)*(?:[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})\b|[\w.-]*/)"
    return re.compile(rf"(?<![\w./@:-])(?:{in_folder}|(?:{'|'.join(files)})(?![\w.-]))")


def _cited(tracked: list[str]) -> dict[str, set[str]]:
    pattern = _citation_pattern(tracked)
    cited: dict[str, set[str]] = {}
    for name in tracked:
        if not _CITING.search(name) or _ROUTES.search(name) or name == "tests/test_references.py":
            continue
        text = (ROOT / name).read_text(errors="replace")
        for found in pattern.finditer(text):
            path = found.group(0)
            if not any(mark in text[found.end() : found.end() + 1] for mark in "*{<"):  # a glob or a template
                cited.setdefault(path.rstrip("/"), set()).add(name)
    return cited


def test_every_path_the_repository_cites_exists():
    tracked = _tracked()
    cited = _cited(tracked)
    assert "docs/explanation/delivery.md" in cited and "gunicorn.conf.py" in cited  # the scan finds citations
    missing = {
        path: sorted(where)
        for path, where in cited.items()
        if path not in _BUILT and not any((ROOT / under / path).exists() for under in _ALSO_UNDER)
    }
    assert not missing, "paths cited that do not exist:\n" + "\n".join(
        f"  {path}  (in {', '.join(where)})" for path, where in sorted(missing.items())
    )
