"""The console's templates keep to what a strict Content Security Policy and an offline console allow."""

import re
from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).resolve().parents[1] / "templates").rglob("*.html"))
FORM = re.compile(r"<form\b[^>]*>(.*?)</form>", re.S | re.I)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_no_inline_script_style_or_event_handler(template):
    html = template.read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script>: move it to static/js"
    assert not re.search(r"<style\b", html, re.I), "inline <style>: move it to static/css"
    assert not re.search(r"\sstyle=", html), "style attribute: use a class"
    assert not re.search(r"\son[a-z]+=", html), "inline event handler: use static/js"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_nothing_is_loaded_from_another_host(template):
    html = template.read_text()
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_every_post_form_carries_the_csrf_token(template):
    for form in FORM.finditer(template.read_text()):
        if re.search(r'method="post"', form.group(0), re.I):
            assert "{% csrf_token %}" in form.group(1)
