"""Start gunicorn the way production does (its gunicorn.conf.py when the project has one) and watch its workers."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUNICORN_CONF = ROOT / "gunicorn.conf.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_command(port: int, extra_args: list[str]) -> list[str]:
    command = [sys.executable, "-m", "gunicorn"]
    if GUNICORN_CONF.exists():
        command += ["--config", str(GUNICORN_CONF)]
    else:
        # Until the project has its own configuration: sync workers, two per core.
        command += ["--workers", str(2 * (os.cpu_count() or 1))]
    # Command-line values take precedence over the configuration file's.
    return [*command, "--bind", f"127.0.0.1:{port}", *extra_args, "config.wsgi:application"]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, or None when it is gone or not ours to read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Server:
    """A gunicorn master on a free port; a background thread keeps each worker's peak RSS (VmHWM)."""

    def __init__(self, env: dict[str, str], extra_args: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.command = gunicorn_command(self.port, extra_args)
        self.log = log_path.open("w")
        self.process = subprocess.Popen(
            self.command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.peak_rss_kib: dict[int, int] = {}
        self.threads_per_worker: dict[int, int] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, path: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}; see {self.log.name}")
            try:
                urllib.request.urlopen(self.url + path, timeout=2)
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer means the workers serve
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer within {timeout} s; see {self.log.name}")

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            for worker in _children(self.process.pid):
                peak = _status_kib(worker, "VmHWM")
                self.peak_rss_kib[worker] = max(peak, self.peak_rss_kib.get(worker, 0))
                self.threads_per_worker[worker] = _status_kib(worker, "Threads")

    def stop(self) -> None:
        self._stop.set()
        self._watcher.join()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
