"""How long `make test`'s parts take: the checks (ruff with import-linter, mypy, the strict documentation build) one
after another and side by side, and the pytest pass serially and in pytest-xdist workers, alternately. Each run
notes the load average before and after: on a shared machine the wall times say as much about the neighbours as
about the suite, and the sum of the tests' own durations (pytest's JUnit report) less so.

    .venv/bin/python -m bench.suite_time --workers 0,auto --rounds 1
    .venv/bin/python -m bench.suite_time --checks-only
    .venv/bin/python -m bench.suite_time --junit serial.xml parallel.xml     # sum reports already written

Every run stops by itself (pytest's own bounds); nothing but 127.0.0.1 is touched.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHECKS = {
    "lint": [[str(BIN / "ruff"), "check", "."], [str(BIN / "lint-imports")]],
    "types": [[str(BIN / "mypy"), "."]],
    "docs": [[str(BIN / "sphinx-build"), "-q", "-W", "--keep-going", "-n", "-E", "-b", "html", "docs"]],
}


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def file_durations(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) from a pytest JUnit XML report."""
    per_file: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).iter("testcase"):
        parts = (case.get("classname") or "").split(".")  # tests.browser.test_x[.TestClass]
        module = next((n for n, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
        per_file["/".join(parts[: module + 1]) + ".py"] += float(case.get("time") or 0)
    return dict(per_file)


def summary(junit: Path, top: int = 10) -> str:
    durations = file_durations(junit)
    longest = sorted(durations.items(), key=lambda item: -item[1])[:top]
    lines = [f"  sum of the tests' durations: {sum(durations.values()):.0f} s over {len(durations)} files"]
    lines += [f"    {seconds:7.1f} s  {name}" for name, seconds in longest]
    return "\n".join(lines)


def timed(commands: list[list[str]], env: dict[str, str]) -> tuple[float, int]:
    started = time.monotonic()
    code = 0
    for command in commands:
        code = code or subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False).returncode
    return time.monotonic() - started, code


def fresh_clone() -> None:
    """No mypy or import-linter cache, as in a fresh clone (the documentation build's -E reads every page anew)."""
    for cache in (".mypy_cache", ".import_linter_cache", ".grimp_cache"):
        shutil.rmtree(ROOT / cache, ignore_errors=True)


def run_checks(output: Path) -> None:
    env = os.environ | {"DEBUG": "1"}
    total = 0.0
    for name, commands in CHECKS.items():
        fresh_clone()
        before = load()
        if name == "docs":
            commands = [[*commands[0], str(output / "docs")]]
        seconds, code = timed(commands, env)
        total += seconds
        print(f"{name}: {seconds:.1f} s (exit {code}); load {before} -> {load()}")
    print(f"checks one after another: {total:.1f} s")
    fresh_clone()
    before = load()
    # -o: the venv is taken as installed, as it is here (the Makefile's stamp would reinstall after any edit).
    make = ["make", "--no-print-directory", "-o", ".venv/.installed", "-j3", "-Otarget", "checks"]
    seconds, code = timed([make], os.environ.copy())
    print(f"checks side by side (make -j3 checks): {seconds:.1f} s (exit {code}); load {before} -> {load()}")


def run_pytest(workers: str, output: Path, arguments: list[str]) -> None:
    junit = output / f"pytest-{workers}-{time.monotonic_ns()}.xml"
    command = [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *arguments]
    if workers != "0":
        command[1:1] = ["-n", workers, "--maxprocesses", "4", "--dist", "loadgroup"]
    before = load()
    seconds, code = timed([command], os.environ.copy())
    print(f"pytest -n {workers}: {seconds:.0f} s wall (exit {code}); load {before} -> {load()}")
    if junit.exists():
        print(summary(junit))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="0,auto", help="pytest -n values to compare, in turn (0: no xdist)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--checks-only", action="store_true")
    parser.add_argument("--junit", nargs="*", type=Path, help="only sum these JUnit reports")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (test files, -m ...)")
    options = parser.parse_args()
    if options.junit:
        for report in options.junit:
            print(report)
            print(summary(report))
        return
    with tempfile.TemporaryDirectory(prefix="suite-time-") as scratch:
        run_checks(Path(scratch))
        if options.checks_only:
            return
        for _ in range(options.rounds):
            for workers in options.workers.split(","):
                run_pytest(workers, Path(scratch), options.pytest_args)


if __name__ == "__main__":
    main()
