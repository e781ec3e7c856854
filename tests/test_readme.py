"""README.md stays true: its API error table names every code an ApiError can carry, and its configuration table
every variable the settings read."""

import re
from pathlib import Path

from ingestion import exceptions

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
SETTINGS = (Path(__file__).resolve().parent.parent / "config" / "settings.py").read_text()


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_error_table_lists_every_api_error_code():
    table = README.split("## The API", 1)[1].split("### OpenAPI", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", table))
    codes = {error.default_code for error in _subclasses(exceptions.ApiError)}
    assert codes - documented == set()


def test_the_configuration_table_lists_every_variable_the_settings_read():
    read = set(re.findall(r'env_\w+\(\s*"([A-Z][A-Z0-9_]+)"', SETTINGS))
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", README, flags=re.MULTILINE))
    assert read - documented == set()


ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_stands_on_its_own_every_file_it_names_is_in_the_repository():
    """A clone has nothing beside it (no ../shared): every relative link and every docs/ path it names exists."""
    assert "../" not in README
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    named = re.findall(r"`((?:docs|tests|bench|static|templates)/[\w./-]+\.\w+)`", README)
    targets = [target for target in links + named if not target.startswith(("http://", "https://", "mailto:"))]
    assert "docs/contract.md" in targets
    assert [target for target in targets if not (ROOT / target).exists()] == []


def test_make_run_serves_on_the_port_the_readme_says_how_to_change():
    import subprocess

    assert "make run PORT=8001" in README
    dry_run = subprocess.run(
        ["make", "-n", "run", "PORT=8123"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "manage.py serve 127.0.0.1:8123" in dry_run


def test_the_readme_says_how_to_try_password_reset_locally():
    section = README.split("**Trying password reset locally.**", 1)[1].split("\n\n", 1)[0]
    assert "printed in the\nterminal" in section and "EMAIL_HOST=127.0.0.1 EMAIL_PORT=1025" in section
