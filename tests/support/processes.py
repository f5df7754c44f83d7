"""Processes a test starts: a free port for it, waiting until it answers, and a clean stop
of it and its children."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
from collections.abc import Callable


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_answers(
    process: subprocess.Popen, ask: Callable[[], object], timeout: float
) -> bool:
    """Call ``ask`` until it returns without a network error; False if ``process`` died or
    ``timeout`` seconds passed first (a server that is still booting refuses or stalls)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            ask()
            return True
        except (OSError, urllib.error.URLError, ValueError):
            time.sleep(0.2)  # polling interval while the server boots, not a state wait
    return False


def end_session(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Stop a process started with ``start_new_session``: SIGTERM, then kill its session.

    What it started (kernels, worker processes) is in the same session and goes with it.
    """
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
