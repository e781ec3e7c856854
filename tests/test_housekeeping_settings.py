"""HOUSEKEEPING_SECONDS is refused at start-up outside 0..86400 (a huge period overflowed the prunes' dates later,
in the worker, where it was only logged)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # an end-to-end test that takes seconds (pyproject.toml)

ROOT = Path(__file__).resolve().parent.parent


def start_up(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", "HOUSEKEEPING_SECONDS": value}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("value", ["-1", "86401", "1000000000000"])
def test_a_period_out_of_range_stops_the_start(value):
    result = start_up(value)
    assert result.returncode != 0
    assert "HOUSEKEEPING_SECONDS must be 0 (no housekeeping in the worker) to 86400" in result.stderr


@pytest.mark.parametrize("value", ["0", "60", "86400"])
def test_a_period_in_range_starts(value):
    result = start_up(value)
    assert result.returncode == 0, result.stderr
