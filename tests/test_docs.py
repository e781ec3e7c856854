"""The documentation site (docs/) stays true to the code: the settings reference names every variable the settings
read with the default they use, `make test` builds the site strictly, and the how-to guides keep their recipes."""

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SETTINGS_PAGE = (DOCS / "reference" / "settings.md").read_text()
# Read by a library, not by our code: documented because an operator sets them.
READ_BY_LIBRARIES = {"SENTRY_ENVIRONMENT"}
# Unset in the environment, the code puts a value of its own there (gunicorn.conf.py makes a temporary folder).
DEFAULT_MADE_AT_START = {"PROMETHEUS_MULTIPROC_DIR"}


def _documented() -> dict[str, str]:
    """Each row of the settings table: the variable -> its default column."""
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)`[^|]*\| ([^|]*) \|", SETTINGS_PAGE, flags=re.MULTILINE)
    return dict(rows)


def _constant(node: ast.expr) -> object:
    """A default written as a literal or as arithmetic on literals (24 * 60 * 60); anything else is not compared."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List) and all(isinstance(item, ast.Constant) for item in node.elts):
        return [item.value for item in node.elts if isinstance(item, ast.Constant)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _constant(node.left), _constant(node.right)
        if isinstance(left, int) and isinstance(right, int):
            return left * right
    return ...


def _reads(path: Path) -> dict[str, object]:
    """Every variable a module reads from the environment -> its default (... when not a constant, None if none)."""
    found: dict[str, object] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        name = node.args[0].value
        function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        on_environ = isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "os.environ"
        if isinstance(name, str) and (function.startswith(("env_", "_env_")) or (function == "get" and on_environ)):
            default = _constant(node.args[1]) if len(node.args) > 1 else None
            found[name] = f"{function}:{default!r}" if default is not ... else ...
    return found


def _every_read() -> dict[str, object]:
    modules = ("gunicorn.conf.py", "ops/metrics.py", "config/settings.py")
    return {name: read for module in modules for name, read in _reads(ROOT / module).items()}


def test_the_settings_reference_lists_every_variable_the_code_reads():
    missing = set(_every_read()) - set(_documented())
    assert missing == set(), f"add a row for each to docs/reference/settings.md: {sorted(missing)}"


def test_every_variable_in_the_settings_reference_is_read_by_the_code():
    stale = set(_documented()) - set(_every_read()) - READ_BY_LIBRARIES
    assert stale == set(), f"docs/reference/settings.md documents variables nothing reads: {sorted(stale)}"


def _expected_default(read: str) -> str | None:
    """What the default column must start with, for a default the code writes as a constant."""
    function, _, literal = read.partition(":")
    value = ast.literal_eval(literal)
    if value is None or value == "" or value == []:
        return "empty"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return "`" + ",".join(value) + "`"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"
    if isinstance(value, str) and function in ("get", "_env_int") and value in ("on", "off"):
        return value
    return f"`{value}`" if "\n" not in value and len(value) < 80 else None


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(name for name, read in _every_read().items() if read is not ...))
def test_the_settings_reference_gives_the_default_the_code_uses(name):
    read = _every_read()[name]
    assert isinstance(read, str)
    expected = _expected_default(read)
    documented = _documented().get(name, "")
    if expected is None or name in DEFAULT_MADE_AT_START:
        pytest.skip("a default the table describes in words")
    if expected == "empty":
        assert documented.startswith(("empty", "unset", "none", "`0` (off)", "`0`")), (name, documented)
    else:
        assert documented.startswith(expected), f"{name}: the code's default is {expected}, the table says {documented}"


def test_make_test_builds_the_documentation_strictly_and_offline():
    dry_run = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    build = next(line for line in dry_run.stdout.splitlines() if "sphinx-build" in line)
    assert " -W " in build and " --keep-going " in build and " -n " in build and "linkcheck" not in build
    assert "myst_heading_anchors = " in (DOCS / "conf.py").read_text()


def _generated_pages():
    import importlib.util

    spec = importlib.util.spec_from_file_location("generated_pages", DOCS / "_ext" / "generated_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_is_generated_from_the_openapi_document_the_service_serves(monkeypatch):
    """docs/reference/endpoints.md is filled in at build time from the same generator /api/schema/ uses, so it cannot
    drift; this checks that the page asks for it and that every path, operation and schema is rendered."""
    from drf_spectacular.generators import SchemaGenerator

    assert "\n<!-- generated: api-endpoints -->\n" in (DOCS / "reference" / "endpoints.md").read_text()
    pages = _generated_pages()
    monkeypatch.setenv("DEBUG", "1")  # what the documentation build sets when it asks for the document
    document = pages.served_openapi_document()
    assert document == SchemaGenerator().get_schema(request=None, public=True)
    rendered = pages.render_openapi(document)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert f"`{method.upper()} {path}`" in rendered
            assert f"### {operation['summary']}" in rendered, f"{method} {path} has no summary"
    for name in document["components"]["schemas"]:
        assert f"\n### {name}\n" in rendered


def test_the_commands_reference_is_generated_from_every_command_of_the_project(monkeypatch):
    from django.core.management import get_commands

    assert "\n<!-- generated: management-commands -->\n" in (DOCS / "reference" / "commands.md").read_text()
    monkeypatch.setenv("DEBUG", "1")
    rendered = _generated_pages().management_commands()
    ours = {name for name, app in get_commands().items() if (ROOT / app / "__init__.py").exists()}
    assert {"createapikey", "worker", "settelegramwebhook"} <= ours
    for name in ours:
        assert f"### {name}\n" in rendered and f"`manage.py {name}`" in rendered


def test_the_console_guide_says_how_to_try_password_reset_locally():
    page = (DOCS / "howto" / "use-the-console.md").read_text()
    section = page.split("## Try password reset locally", 1)[1].split("\n## ", 1)[0]
    assert "printed in the\nterminal" in section and "EMAIL_HOST=127.0.0.1 EMAIL_PORT=1025" in section


def test_the_documentation_site_names_its_icon():
    """Without an icon link each page makes browsers ask the site for /favicon.ico, which `make docs` does not serve:
    a 404 on every page load. The build copies html_favicon and links it from every page."""
    conf = (DOCS / "conf.py").read_text()
    found = re.search(r'^html_favicon = "([^"]+)"$', conf, re.MULTILINE)
    assert found is not None
    assert (DOCS / found.group(1)).resolve().is_file()
