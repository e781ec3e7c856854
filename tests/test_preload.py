"""Starting without races (ops/preload.py): `make run` answers every time, and the main thread imports, before any
other thread starts, every module the app's code imports inside a function."""

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from django.conf import settings

from tests.live_stack import ROOT, service_env
from tests.ports import free_port

# Imports inside functions that run in the main thread before any other starts, or outside a process that serves.
_NOT_IN_A_THREAD = ("manage.py", "gunicorn.conf.py", "config/settings.py", "apps.py")


def _app_modules() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    skipped = ("tests/", "migrations/", "bench/", "docs/")
    return [
        ROOT / name for name in listed.split() if not any(part in f"/{name}" for part in [f"/{s}" for s in skipped])
    ]


def _imports_inside_functions(path: Path) -> set[tuple[str, str]]:
    """(module, name or '') of every import statement inside a function."""
    found: set[tuple[str, str]] = set()
    for function in ast.walk(ast.parse(path.read_text())):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found |= {(alias.name, "") for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found |= {(node.module, alias.name) for alias in node.names}
    return found


def test_gunicorns_worker_imports_every_module_the_code_imports_on_first_use_before_its_threads(tmp_path):
    """gunicorn.conf.py's post_worker_init runs in a worker after the app loads and before its request threads
    start; it calls the same function as `manage.py serve` and `manage.py worker`."""
    wanted = sorted(
        {
            found
            for path in _app_modules()
            if not str(path.relative_to(ROOT)).endswith(_NOT_IN_A_THREAD)
            for found in _imports_inside_functions(path)
        }
    )
    assert ("dateparser.date", "DateDataParser") in wanted  # the scan sees function-level imports
    wanted.append(("config.urls", ""))  # and every view, imported by the URL resolver on the first request
    check = (
        "import json, runpy, sys, django; django.setup(); "
        "runpy.run_path('gunicorn.conf.py')['post_worker_init'](None); wanted = json.loads(sys.argv[1]); "
        "print(json.dumps([[m, n] for m, n in wanted if m not in sys.modules "
        "or (n and not hasattr(sys.modules[m], n))]))"
    )
    env = service_env(DJANGO_SETTINGS_MODULE="config.settings", PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", check, json.dumps(wanted)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert missing == [], f"imported on first use, not by ops.preload.import_before_threads: {missing}"
    assert len(settings.IMPORTED_ON_FIRST_USE) == len(set(settings.IMPORTED_ON_FIRST_USE))


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


STARTS = 20
AT_ONCE = 4  # servers starting side by side: the same import timing, a quarter of the waiting
DEADLINE = 90  # seconds for one group to answer on a loaded 2-core machine (each takes about 3 s on a quiet one)


def test_make_run_answers_every_time_with_no_traceback(tmp_path):
    """`make run` is `manage.py serve` with Django's autoreloader: its thread imports the URLconf while the serving
    thread starts the worker. Before ops/preload.py about one start in eight died with an ImportError from Authlib."""
    migrated = tmp_path / "migrated.sqlite3"
    env = service_env(DEBUG="1", TASK_BACKEND="database", DATABASE_URL=f"sqlite:///{migrated}")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input"], cwd=ROOT, env=env, capture_output=True, check=True
    )
    failures = []
    for group in range(STARTS // AT_ONCE):
        started = []
        for _ in range(AT_ONCE):
            port = free_port()
            # A database of its own: servers side by side on one SQLite file would wait on each other's locks.
            database = tmp_path / f"{port}.sqlite3"
            shutil.copyfile(migrated, database)
            own_env = {**env, "DATABASE_URL": f"sqlite:///{database}"}
            log = tempfile.TemporaryFile(dir=tmp_path)  # noqa: SIM115 (closed below)
            command = [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"]
            process = subprocess.Popen(command, cwd=ROOT, env=own_env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)  # fmt: skip
            started.append((port, process, log))
        deadline = time.monotonic() + DEADLINE
        waiting = {port for port, _, _ in started}
        while waiting and time.monotonic() < deadline:
            waiting -= {port for port in waiting if _answers(port)}
            time.sleep(0.1)
        for number, (port, process, log) in enumerate(started, start=group * AT_ONCE + 1):
            _stop(process)
            log.seek(0)
            output = log.read().decode(errors="replace")
            log.close()
            if port in waiting or "Traceback" in output:
                failures.append(f"start {number}: answered={port not in waiting}\n{output}")
    assert not failures, f"{len(failures)} of {STARTS} starts failed:\n" + "\n".join(failures)[-6000:]
