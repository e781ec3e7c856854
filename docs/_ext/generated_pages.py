"""Pages whose facts come from the code, filled in when Sphinx reads them, so the site cannot drift from the code.

A page asks for a generated part with an HTML comment on a line of its own, ``<!-- generated: NAME -->``; the build
replaces that line with what GENERATORS[NAME] returns (Markdown). An unknown NAME fails the build.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

DOCS_ROOT = Path(__file__).resolve().parent.parent
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


def api_endpoints() -> str:
    """Every endpoint of the OpenAPI document served at /api/schema/, as Markdown (docs/reference/endpoints.md)."""
    return render_openapi(served_openapi_document())


def served_openapi_document() -> dict[str, Any]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")  # the settings want a SECRET_KEY otherwise; the document does not depend on it
    django.setup()
    from drf_spectacular.generators import SchemaGenerator

    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type_of(schema: dict[str, Any]) -> str:
    """One schema's type in a few words, linking to a named schema of the document."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    for combined in ("oneOf", "anyOf", "allOf"):
        if combined in schema:
            return " or ".join(_type_of(part) for part in schema[combined])
    kind = schema.get("type", "any")
    if kind == "array":
        kind = f"array of {_type_of(schema.get('items', {}))}"
    elif schema.get("format"):
        kind = f"{kind} ({schema['format']})"
    if "enum" in schema:
        kind += ": " + ", ".join(f"`{value}`" for value in schema["enum"] if value is not None)
    if schema.get("nullable"):
        kind += ", or null"
    return kind


def _fields(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return [f"{_type_of(schema)}." + (" Any members." if schema.get("additionalProperties") else "")]
    required = set(schema.get("required", []))
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for name, field in properties.items():
        rows.append(
            f"| `{name}` | {_cell(_type_of(field))} | {'yes' if name in required else 'no'} "
            f"| {_cell(field.get('description', ''))} |"
        )
    if schema.get("additionalProperties"):
        rows.append("| (any other) | any | no | kept with the message as its context |")
    return rows


def _operation(method: str, path: str, operation: dict[str, Any], schemes: dict[str, Any]) -> list[str]:
    lines = [f"### {operation.get('summary') or operation['operationId']}", "", f"`{method.upper()} {path}`", ""]
    if operation.get("deprecated"):
        lines += ["**Deprecated.**", ""]
    if operation.get("description"):
        lines += [operation["description"], ""]
    credentials = [name for requirement in operation.get("security", []) for name in requirement]
    accepted = "; or ".join(_cell(schemes[name].get("description", name)) for name in credentials)
    lines += [f"Authentication: {accepted or 'none.'}", ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        for parameter in parameters:
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_cell(_type_of(parameter.get('schema', {})))} "
                f"| {'yes' if parameter.get('required') else 'no'} | {_cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Request body (`{media}`):", "", *_fields(content.get("schema", {})), ""]
    lines += ["Responses:", ""]
    for status, response in operation.get("responses", {}).items():
        contents: list[dict[str, Any]] = list(response.get("content", {}).values())
        schema = contents[0].get("schema") if contents else None
        shape = f" Body: {_type_of(schema)}." if schema else ""
        headers = ", ".join(f"`{name}`" for name in response.get("headers", {}) if name != "X-Request-ID")
        shape += f" Headers: {headers}." if headers and status.startswith("2") else ""
        lines.append(f"- **{status}**: {_cell(response.get('description', ''))}{shape}")
    return [*lines, ""]


def render_openapi(document: dict[str, Any]) -> str:
    schemes = document.get("components", {}).get("securitySchemes", {})
    lines: list[str] = []
    for tag in document.get("tags", []):
        lines += [f"## {tag['name'][:1].upper()}{tag['name'][1:]}", "", tag.get("description", ""), ""]
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                if tag["name"] in operation.get("tags", []):
                    lines += _operation(method, path, operation, schemes)
    lines += ["## Schemas", "", "The shapes the endpoints above send and answer.", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += [f"### {name}", "", _cell(schema.get("description", "")), "", *_fields(schema), ""]
    return "\n".join(lines)


# Options every Django command has; the reference lists only a command's own.
_DJANGO_OPTIONS = {"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color",
                   "skip_checks"}  # fmt: skip


def _expanded(action: Any, command: str) -> str:
    """An option's help with argparse's %(default)s-style fields filled in, as `--help` prints it."""
    try:
        return str(action.help or "") % {**vars(action), "prog": f"manage.py {command}"}
    except (KeyError, TypeError, ValueError):
        return str(action.help or "")


def management_commands() -> str:
    """Every management command of the project's own apps, with its help and its options, from its parser."""
    served_openapi_document()  # sets Django up the same way
    from django.conf import settings
    from django.core.management import get_commands, load_command_class

    ours = {app for app in settings.INSTALLED_APPS if (DOCS_ROOT.parent / app / "__init__.py").exists()}
    lines: list[str] = []
    for name, app in sorted(get_commands().items()):
        if app not in ours:
            continue
        command = load_command_class(app, name)
        parser = command.create_parser("manage.py", name)
        lines += [f"### {name}", "", f"`manage.py {name}` ({app}): {_cell(command.help)}", ""]
        options = [action for action in parser._actions if action.dest not in _DJANGO_OPTIONS]
        if options:
            lines += ["| option | meaning |", "|---|---|"]
            for action in options:
                flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
                lines.append(f"| {flags} | {_cell(_expanded(action, name))} |")
            lines.append("")
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {
    "management-commands": management_commands,
    "error-codes": error_codes,
    "api-endpoints": api_endpoints,
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
