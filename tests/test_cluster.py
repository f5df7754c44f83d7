"""Grading on Dask: workers started as separate commands, the preload's checks, TLS.

The grading tests that also run on a ``LocalCluster`` are in ``test_grade.py``
(parametrised over the engines); these start ``dask scheduler`` and ``dask worker``
themselves, on 127.0.0.1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dask_support import environment, start_scheduler, start_worker

pytestmark = pytest.mark.kernel


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (
            [],
            {"PATH": str(Path(sys.executable).parent)},  # no bubblewrap on this PATH
            "the grading sandbox cannot run here: bubblewrap is not installed",
        ),
        (["--nthreads", "2"], {}, "the worker has 2 threads; start it with --nthreads 1"),
    ],
    ids=["without-sandbox", "two-threads"],
)
def test_a_worker_that_cannot_grade_refuses_to_start(tmp_path, args, env, reason):
    scheduler, address = start_scheduler(tmp_path)
    worker = None
    try:
        worker = start_worker(address, tmp_path, "unfit", args=args, env=environment(**env))
        assert worker.process.wait(timeout=120) != 0
        assert f"this worker refuses to start: {reason}" in worker.log_text()
        assert "Registered to" not in worker.log_text()  # it never joined the scheduler
    finally:
        if worker is not None:
            worker.stop()
        scheduler.stop()
