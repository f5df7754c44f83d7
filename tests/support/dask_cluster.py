"""Dask processes for the cluster tests, started as an instructor would start them.

``dask scheduler`` and ``dask worker ... --preload autograder.cluster`` run as separate
commands (this environment's ``bin/dask``) on 127.0.0.1, each in its own session with
its log in a file; :meth:`DaskProcess.stop` ends the process and everything it started.
TLS certificates are made with the ``openssl`` commands the README gives.  The job
functions here (:func:`crash_some`, :func:`lose_result_once`) fail workers on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from support.processes import end_session

DASK = str(Path(sys.executable).with_name("dask"))
#: The scheduler settings grading needs (README: "Grading on a Dask cluster").
SCHEDULER_ENV = {
    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
    "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0",
}


@dataclass
class DaskProcess:
    """One ``dask`` command running in the background."""

    process: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """Ask the command to stop (SIGTERM), then kill its whole session if it lingers."""
        end_session(self.process)


def environment(**extra: str) -> dict[str, str]:
    """The commands' environment: this interpreter's bin/ first on PATH, and ``extra``."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def run_dask(args: list[str], log: Path, env: dict[str, str]) -> DaskProcess:
    with open(log, "w") as fh:
        process = subprocess.Popen(
            [DASK, *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,
            start_new_session=True,
        )
    return DaskProcess(process, log)


def start_scheduler(
    workdir: Path, *, tls: list[str] | None = None, settings: dict[str, str] = SCHEDULER_ENV
) -> tuple[DaskProcess, str]:
    """Start ``dask scheduler`` on a free port of 127.0.0.1; return it and its address.

    ``settings`` are variables for its environment: ``DASK_...`` settings (``{}``: Dask's
    defaults), ``PYTHONPATH``.
    """
    info = workdir / "scheduler.json"
    args = ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
    args += ["--scheduler-file", str(info)] + (tls or [])
    scheduler = run_dask(args, workdir / "scheduler.log", environment(**settings))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if info.exists():
            try:
                return scheduler, json.loads(info.read_text())["address"]
            except (ValueError, KeyError):
                pass  # written but not complete yet
        if scheduler.process.poll() is not None:
            break
        time.sleep(0.1)  # polling for the scheduler's own file
    scheduler.stop()
    raise RuntimeError(f"dask scheduler did not start:\n{scheduler.log_text()[-2000:]}")


def start_worker(
    address: str, workdir: Path, name: str, *, args: list[str] = (), env: dict | None = None
) -> DaskProcess:
    """Start ``dask worker ADDRESS --nthreads 1 --preload autograder.cluster`` (+ ``args``)."""
    argv = ["worker", address, "--nthreads", "1", "--preload", "autograder.cluster"]
    argv += ["--name", name, "--no-dashboard", "--local-directory", str(workdir / name)]
    return run_dask(argv + list(args), workdir / f"{name}.log", env or environment())


def wait_for_workers(address: str, n: int, *, timeout: float = 120) -> None:
    """Return once the scheduler at ``address`` has ``n`` workers (a test's own client)."""
    from distributed import Client  # the grader imports it lazily too: a slow import

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=timeout)


def make_certificates(folder: Path) -> Path:
    """A CA and one certificate signed by it (``ca.pem``, ``cert.pem``, ``key.pem``)."""
    folder.mkdir(parents=True, exist_ok=True)
    commands = [
        "openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=specdec-dask-ca "
        "-keyout ca-key.pem -out ca.pem",
        "openssl req -newkey rsa:2048 -nodes -subj /CN=specdec-dask -keyout key.pem -out cert.csr",
        "openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial "
        "-days 30 -out cert.pem",
    ]
    for command in commands:
        subprocess.run(command.split(), cwd=folder, check=True, capture_output=True)
    return folder


#: The variable that names the file where `crash_some` notes each worker it kills.
DEATHS_FILE = "SPECDEC_TEST_DEATHS"


#: How far into its job a crashing submission takes its worker down, in seconds.  A blamed
#: job that the scheduler runs again must be stopped before then, by a message that goes
#: from the worker to the scheduler, the client and back, which can take over 2 s when
#: three test processes share two cores.
CRASH_AFTER = 4.0


def crash_some(job):
    """A job function for workers: grade as usual, but kill the worker for two students.

    ``mallory``'s job kills its worker every time, as a submission that crashes its worker
    would; ``victim``'s kills it the first time only, as a worker killed from outside
    would.  Each death is first noted (the student's name, one line) in the file that
    :data:`DEATHS_FILE` names, and comes :data:`CRASH_AFTER` into the job, as a real crash
    comes after the kernel has started.
    """
    from autograder.grading.job import grade_job

    deaths = Path(os.environ[DEATHS_FILE])
    before = deaths.read_text().split() if deaths.exists() else []
    if job.student == "mallory" or (job.student == "victim" and "victim" not in before):
        time.sleep(CRASH_AFTER)
        with open(deaths, "a") as fh:
            fh.write(f"{job.student}\n")
        os._exit(77)
    return grade_job(job)


#: How long after its job returned ``lose_result_once`` takes its worker down.
LOSE_AFTER = 1.0
#: How long the job takes when it is run again: long enough for a test to see the
#: result lost before it is computed anew.
RERUN_SECONDS = 3.0


def lose_result_once(notes: Path, job) -> str:
    """A job function for workers: return the student's name (no grading).

    The first time, the worker dies :data:`LOSE_AFTER` seconds after the job returned,
    with the result in its memory, as a worker does when the job after it crashes; run
    again, the job takes :data:`RERUN_SECONDS`.  ``notes`` gets a line per run (``ran``)
    and per death (``died``).
    """
    first = not notes.exists()
    with open(notes, "a") as fh:
        fh.write("ran\n")
    if not first:
        time.sleep(RERUN_SECONDS)
        return job.student

    def die() -> None:
        time.sleep(LOSE_AFTER)
        with open(notes, "a") as fh:
            fh.write("died\n")
        os._exit(77)

    threading.Thread(target=die, daemon=True).start()
    return job.student
