"""The drawing of the layers (docs/explanation/architecture.md) and the import-linter contracts (pyproject.toml)
name every app, and the lower floors keep to what the drawing says they hold. Each failure says what to add where.
(The contracts themselves run in `make lint`: `lint-imports`.)"""

import ast
import re
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
NOT_APPS = {"tests", "bench", "docs", "static", "templates"}
# Identity and the thread: models and services, no pages and nothing of the request path
# (docs/explanation/architecture.md#the-layers).
LOWER_FLOORS = ("accounts", "keys", "conversations")
NOT_ON_LOWER_FLOORS = (
    "django.http",
    "django.shortcuts",
    "django.urls",
    "django.views",
    "django.template",
    "rest_framework",
)


def _contracts() -> tuple[list[str], list[str], list[str]]:
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {contract["type"]: contract for contract in linter["contracts"]}
    layers = [name.strip() for layer in contracts["layers"]["layers"] for name in re.split(r"[|:]", layer)]
    return linter["root_packages"], layers, contracts["acyclic_siblings"]["ancestors"]


def _packages() -> set[str]:
    return {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_APPS and not path.parent.name.startswith(".")
    }


def _layout_drawing() -> str:
    page = (ROOT / "docs" / "explanation" / "architecture.md").read_text()
    section = page.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_every_app_is_in_both_contracts_and_in_the_architecture_drawing():
    roots, layers, ancestors = _contracts()
    drawing = _layout_drawing()
    for package in sorted(_packages()):
        where = []
        if package not in roots:
            where.append("root_packages in pyproject.toml's [tool.importlinter]")
        if package not in layers:
            where.append("the layers contract in pyproject.toml (on its floor)")
        if package not in ancestors:
            where.append("the acyclic_siblings contract's ancestors in pyproject.toml")
        if not re.search(rf"^\s*(\S.*?\s)?{package}\s", drawing, re.MULTILINE):
            where.append("docs/explanation/architecture.md's drawing of the layers (a row: floor, app, what it holds)")
        assert not where, f"the app {package!r} is missing from: " + "; ".join(where)


def test_the_installed_apps_are_the_projects_packages():
    ours = {app for app in settings.INSTALLED_APPS if (ROOT / app / "__init__.py").exists()}
    assert ours == _packages() - {"ops", "config"}, "INSTALLED_APPS and the project's packages differ"


def test_identity_and_the_thread_hold_no_pages_and_no_request_path():
    for app in LOWER_FLOORS:
        for path in (ROOT / app).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or path.name == "admin.py":  # the admin's registrations of the models
                continue
            assert path.stem not in ("views", "urls", "forms"), (
                f"{relative}: pages live in console/ (docs/explanation/architecture.md#the-layers)"
            )
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom | ast.Import):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    for name in names:
                        assert not name.startswith(NOT_ON_LOWER_FLOORS), (
                            f"{relative} imports {name}: {app} holds models and services only; requests and pages "
                            "belong to ingestion/ or console/ (docs/explanation/architecture.md#the-layers)"
                        )
                if isinstance(node, ast.Attribute) and node.attr in ("cursor", "raw"):
                    raise AssertionError(f"{relative}:{node.lineno}: hand-written SQL belongs to ingestion/hotpath/")


def test_no_module_imports_itself_round_a_circle():
    """The acyclic_siblings contract sees circles between an app's modules; this one also those through a package's
    __init__ (a package that imports its own modules while they import it)."""
    import grimp

    graph = grimp.build_graph(*_contracts()[0], include_external_packages=False)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    circles = [sorted(component) for component in _strongly_connected(imports) if len(component) > 1]
    assert not circles, f"modules that import each other, directly or round a circle: {circles}"


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the sets of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found
