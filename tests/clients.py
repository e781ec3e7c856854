"""The official clients, unmodified, against a live server of ours on 127.0.0.1.

- The npm package `poke` 0.2.5 (its `poke` CLI), installed from tests/clients/package-lock.json by `make clients`
  (`npm ci`; `make test` and `.ci/run` do it). Tests that need it skip, saying why, when node or the package is
  missing.
- The PyPI SDK `poke` 0.2.1 (requirements-dev.txt), imported in the test process.

Each client gets its own home: `HOME` and `XDG_CONFIG_HOME` point into the test's temporary folder, so
`poke login` writes `credentials.json` there, never into the real `~/.config/poke`, and the Python SDK's
credentials-file fallback reads the same file. `POKE_API` and `POKE_FRONTEND` point at the live server.

The CLI opens `{POKE_FRONTEND}/device` for the person with the `open` package, which runs `xdg-open` from `PATH`.
The home's `bin/xdg-open` comes first on that `PATH`: it records the address (`ClientHome.opened()`) instead of
launching a desktop browser, so a test can hand it to Chromium (tests/browser) or to Django's test client.

Use the fixtures in tests/conftest.py: `poke_cli` (a `PokeCli` on the live server), `poke_home` (the `ClientHome`
that `poke_cli` and `poke_sdk_env` share) and `poke_sdk_env` (the SDK's environment set for this test).
"""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NPM_PROJECT = ROOT / "tests" / "clients"
POKE_CLI = NPM_PROJECT / "node_modules" / "poke" / "dist" / "cli.cjs"
NODE = shutil.which("node")
CLI_VERSION = "0.2.5"

_XDG_OPEN = """#!/bin/sh
# Stands in for the desktop's xdg-open in the client tests: records the address the CLI wanted opened.
printf '%s\\n' "$1" >> "$(dirname "$0")/../opened.txt"
"""


def cli_missing() -> str | None:
    """Why the npm CLI cannot run here, or None when it can."""
    if NODE is None:
        return "the poke CLI tests need Node.js: apt-get install -y nodejs npm (.ci/run installs it)"
    if not POKE_CLI.is_file():
        return "the poke CLI is not installed: run `make clients` (npm ci in tests/clients; `make test` runs it)"
    installed = json.loads((POKE_CLI.parent.parent / "package.json").read_text())["version"]
    if installed != CLI_VERSION:
        return f"tests/clients has poke {installed}, not {CLI_VERSION}: run `make clients`"
    return None


def require_cli() -> None:
    reason = cli_missing()
    if reason:
        pytest.skip(reason)


@dataclass
class ClientHome:
    """An isolated home for a client: HOME, XDG_CONFIG_HOME and a PATH whose xdg-open records addresses."""

    root: Path

    def __post_init__(self) -> None:
        (self.root / "config").mkdir(parents=True, exist_ok=True)
        (self.root / "cache").mkdir(exist_ok=True)
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        opener = bin_dir / "xdg-open"
        opener.write_text(_XDG_OPEN)
        opener.chmod(0o755)

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def credentials_file(self) -> Path:
        return self.config / "poke" / "credentials.json"

    def credentials(self) -> dict[str, Any] | None:
        """What `poke login` stored ({"token": ...}), or None when there is no file."""
        try:
            return json.loads(self.credentials_file.read_text())
        except FileNotFoundError:
            return None

    def opened(self) -> list[str]:
        """The addresses the client asked the desktop to open, oldest first."""
        try:
            return (self.root / "opened.txt").read_text().split()
        except FileNotFoundError:
            return []

    def wait_for_opened(self, timeout: float = 10) -> list[str]:
        """The addresses opened, once there is one (the CLI opens it in the background)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if opened := self.opened():
                return opened
            time.sleep(0.05)
        raise AssertionError("the client never asked to open an address")

    def env(self, api: str, frontend: str, **extra: str) -> dict[str, str]:
        """The environment for a client process: this home, our server, nothing from the real user's setup."""
        keep = ("LANG", "LC_ALL", "TZ", "SYSTEMROOT")
        env = {name: os.environ[name] for name in keep if name in os.environ}
        env.update(
            {
                "HOME": str(self.root),
                "XDG_CONFIG_HOME": str(self.config),
                "XDG_CACHE_HOME": str(self.root / "cache"),
                "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
                "POKE_API": api,
                "POKE_FRONTEND": frontend,
                "NO_COLOR": "1",
                "DISPLAY": "",
            }
        )
        env.update(extra)
        return env


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class RunningCli:
    """A `poke` command still running (e.g. `poke login` waiting for approval); its output is read as it comes."""

    def __init__(self, process: subprocess.Popen[str], out: IO[str], err: IO[str]) -> None:
        self.process = process
        self._out, self._err = out, err

    def stdout(self) -> str:
        self._out.seek(0)
        return self._out.read()

    def wait_for_output(self, needle: str, timeout: float = 20) -> str:
        """Wait until stdout contains needle (or the process ends); returns stdout so far."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stdout()
            if needle in text:
                return text
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"poke never printed {needle!r}; stdout: {self.stdout()!r}, stderr: {self.stderr()!r}")

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def wait(self, timeout: float = 30) -> Finished:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"poke did not finish within {timeout} s; stdout: {self.stdout()!r}") from None
        return Finished(self.process.returncode, self.stdout(), self.stderr())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class PokeCli:
    """The unmodified `poke` CLI (npm 0.2.5) pointed at a server: `run` for commands that finish, `start` for ones
    that wait (login)."""

    def __init__(self, home: ClientHome, api: str, frontend: str) -> None:
        self.home, self.api, self.frontend = home, api, frontend

    def _command(self, args: tuple[str, ...]) -> list[str]:
        assert NODE is not None
        return [NODE, str(POKE_CLI), *args]

    def run(self, *args: str, timeout: float = 30, **env: str) -> Finished:
        done = subprocess.run(
            self._command(args), env=self.home.env(self.api, self.frontend, **env), cwd=self.home.root,
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        return Finished(done.returncode, done.stdout, done.stderr)

    @contextmanager
    def start(self, *args: str, **env: str) -> Iterator[RunningCli]:
        logs = self.home.root / "logs"
        logs.mkdir(exist_ok=True)
        stamp = f"{time.monotonic_ns()}"
        with open(logs / f"{stamp}.out", "w+") as out, open(logs / f"{stamp}.err", "w+") as err:
            process = subprocess.Popen(
                self._command(args), env=self.home.env(self.api, self.frontend, **env), cwd=self.home.root,
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            running = RunningCli(process, out, err)
            try:
                yield running
            finally:
                running.stop()


def sdk_environment(monkeypatch: pytest.MonkeyPatch, home: ClientHome, api: str) -> None:
    """Point the PyPI SDK (in this process) at our server and at home's credentials file, with no key from the
    real environment: `Poke()` without api_key then finds the token `poke login` stored."""
    monkeypatch.setenv("POKE_API", api)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home.config))
    monkeypatch.setenv("HOME", str(home.root))
    monkeypatch.delenv("POKE_API_KEY", raising=False)
