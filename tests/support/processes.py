"""Processes a test starts: a free port for it, and a clean stop of it and its children."""

from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
