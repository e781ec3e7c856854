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
