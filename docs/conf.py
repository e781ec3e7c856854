"""Sphinx configuration for the documentation site (`make docs` builds and serves it, `make docs-check` checks it).

The pages are MyST Markdown. The build is strict on purpose: `make docs-check` runs with -W --keep-going and
nitpicky mode, so a broken cross-reference, a missing heading anchor or a page left out of every toctree fails it.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
# The repository's root, for the pages generated from the code (docs/_ext/generated_pages.py), and the extensions.
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

project = "Message ingestion API"
author = "The maintainers"
copyright = "the maintainers"

extensions = [
    "myst_parser",
    "generated_pages",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# benchmarks/ holds the raw measurements the benchmark pages are built from, not pages.
exclude_patterns = ["_build", "benchmarks", "Thumbs.db", ".DS_Store"]

# Every cross-reference must resolve; `[text](page.md#anchor)` needs the anchor to exist (headings up to ####).
nitpicky = True
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline", "attrs_block"]
# External links are never fetched: the build works offline and CI does not run a linkcheck.
linkcheck_ignore = [r".*"]

# Curly quotes and ellipses, but "--only" stays two hyphens: options and flags are written in running text too.
smartquotes_action = "qe"

html_theme = "furo"
html_title = "Message ingestion API"
html_static_path: list[str] = []
html_show_sourcelink = False
# The console's mark: every page links it, so browsers do not ask the site for a /favicon.ico it does not have.
html_favicon = "../static/img/mark.svg"
pygments_style = "friendly"
pygments_dark_style = "monokai"
