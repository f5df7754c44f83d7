"""Grade one submission in isolation: its own scratch course, its own gradebook.

``grade_job`` runs in a worker process.  It copies the assignment's template (the
course config, the source notebooks and a gradebook that knows the assignment) into
a fresh scratch directory, puts the submission in nbgrader's ``submitted/`` layout,
runs nbgrader's own ``Autograde`` converter through ``NbGraderAPI`` with the guarded
executor (and the sandbox), then reads the executed notebook back and returns plain
data.  Only the parent process writes the course's gradebook, feedback and reports.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.execute import NOT_EXECUTED, OUTPUT_TRUNCATED_NOTE, GuardedExecute

#: Environment variable that marks every process a job starts (kernel and children),
#: so that the worker can find and kill them whatever they do to their process group.
JOB_MARKER = "SPECDEC_GRADE_JOB"
#: The student id inside a job's scratch course.  The real id stays with the parent, and
#: the kernel's working directory is known before the job arrives (see ``spare``).
SCRATCH_STUDENT = "student"


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to grade one submission (picklable)."""

    assignment: str
    student: str
    notebook: str  #: notebook name without .ipynb
    data: bytes  #: the submitted notebook's bytes
    template: Path  #: scratch course template: config, source/, gradebook.db
    scratch_root: Path  #: where the job's scratch directory is created
    cell_timeout: float = 30.0
    notebook_timeout: float = 300.0
    sandbox: bool = True
    limits: object | None = None  #: autograder.sandbox.Limits, or None for defaults
    keep_scratch: bool = False


@dataclass
class CellResult:
    grade_id: str
    score: float
    max_score: float
    status: str  #: passed | failed | timeout | missing
    message: str = ""
    flags: list[str] = field(default_factory=list)


def grade_job(job: Job) -> dict:
    """Grade ``job`` and return its result as a JSON-ready dict (never raises)."""
    from autograder import spare

    start = time.monotonic()
    job_dir = spare.claim(_spare_key(job)) or Path(
        tempfile.mkdtemp(prefix="job-", dir=job.scratch_root)
    )
    marker = _marker(job_dir)
    result: dict = {
        "student": job.student,
        "assignment": job.assignment,
        "status": "failed",
        "reason": "",
        "score": 0.0,
        "max_score": 0.0,
        "flags": [],
        "cells": [],
    }
    memory_limit = getattr(job.limits, "memory_bytes", None) if job.sandbox else None
    watch = MemoryWatch(marker, memory_limit or DEFAULT_MEMORY_BYTES)
    watch.start()
    try:
        _run(job, job_dir, marker, result)
    except Exception:  # a bug or an nbgrader failure: this submission only
        result["status"] = "failed"
        result["reason"] = "the grader failed on this submission: " + traceback.format_exc(limit=3)
    finally:
        spare.discard_claimed()  # prepared for this job but not used (it failed early)
        watch.stop()
        if watch.fired:
            result["status"] = "failed"
            result["reason"] = watch.reason
            result["flags"].append("memory-limit")
            for cell in result["cells"]:
                if cell["message"].startswith("not run:"):
                    cell["message"] = f"not run: {watch.reason}"
                elif cell["message"].startswith("KernelDied"):
                    cell["message"] = f"KernelDied: {watch.reason}"
        killed = kill_marked_processes(marker)
        if job.sandbox:
            from autograder import sandbox

            killed += sandbox.kill_leftovers(job_dir)  # also what cleared its environment
        if killed:
            result["flags"].append(f"left {killed} process(es) running after grading (killed)")
        if not job.keep_scratch:
            shutil.rmtree(job_dir, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - start, 3)
    return result


def _run(job: Job, job_dir: Path, marker: str, result: dict) -> None:
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    course = job_dir / "course"
    if not (course / "gradebook.db").exists():  # else prepared along with a spare kernel
        shutil.copytree(job.template, course, dirs_exist_ok=True)
    submitted = course / "submitted" / SCRATCH_STUDENT / job.assignment
    submitted.mkdir(parents=True)
    (submitted / f"{job.notebook}.ipynb").write_bytes(job.data)
    config, _ = _configure(job, job_dir)

    os.environ[JOB_MARKER] = marker
    try:
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        outcome = api.autograde(job.assignment, SCRATCH_STUDENT, force=True, create=True)
    finally:
        os.environ.pop(JOB_MARKER, None)
    if job.sandbox:
        _start_spare(job)  # boots while this job is scored and the next one is set up

    autograded_path = _autograded_dir(job_dir, job.assignment) / f"{job.notebook}.ipynb"
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gb:
        notebook = gb.find_notebook(job.notebook, job.assignment)
        test_cells = [
            (c.name, float(c.max_score))
            for c in notebook.grade_cells
            if c.cell_type == "code" and not _is_solution(gb, c.name, job.notebook, job.assignment)
        ]
        nbgrader_scores = _nbgrader_scores(gb, job)
    if not outcome.get("success") or not autograded_path.exists():
        log = (outcome.get("log") or "") + (outcome.get("error") or "")
        result["status"] = "invalid" if _looks_invalid(log) else "failed"
        result["reason"] = _summarize_failure(log)
        result["cells"] = [
            CellResult(gid, 0.0, pts, "failed", f"not graded: {result['reason']}").__dict__
            for gid, pts in test_cells
        ]
        result["max_score"] = sum(p for _, p in test_cells)
        return

    executed = nbformat.read(autograded_path, as_version=4)
    cells = score_cells(executed, dict(test_cells), job.cell_timeout)
    for cell in cells:
        theirs = nbgrader_scores.get(cell.grade_id)
        if theirs is not None and theirs > cell.score:
            cell.flags.append(f"nbgrader would give {theirs:g} (output read as partial credit)")
    result["cells"] = [c.__dict__ for c in cells]
    result["score"] = sum(c.score for c in cells)
    result["max_score"] = sum(c.max_score for c in cells)
    stopped = [c for c in cells if c.message.startswith("not run:")]
    if any(c.status == "timeout" for c in cells) or any(
        "longer than" in c.message for c in stopped
    ):
        result["status"] = "timeout"
    elif stopped:
        result["status"] = "failed"
    else:
        result["status"] = "graded"
    # the reason execution stopped explains more than the timeout that led to it
    reasons = [c.message for c in stopped] + [c.message for c in cells if c.status == "timeout"]
    result["reason"] = reasons[0].removeprefix("not run: ") if reasons else ""
    from autograder import integrity

    result["flags"] += integrity.static_flags(nbformat.reads(job.data.decode("utf-8"), 4))
    result["flags"] += integrity.runtime_flags(executed, {"job_dir": str(job_dir)})
    by_cell = integrity.cell_flags(executed)
    for cell in result["cells"]:
        cell["flags"] += [f for f in by_cell.get(cell["grade_id"], []) if f not in cell["flags"]]
    result["autograded"] = nbformat.writes(executed)


def _configure(job: Job, job_dir: Path) -> tuple[object, list[type]]:
    """The nbgrader config and autograde preprocessors for ``job`` in ``job_dir``."""
    from autograder import integrity
    from autograder.course import load_config

    course = job_dir / "course"
    config = load_config(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.Execute.timeout = int(job.cell_timeout) or 1
    config.GuardedExecute.timeout = int(job.cell_timeout) or 1
    config.GuardedExecute.notebook_timeout = float(job.notebook_timeout)
    # Every test cell has run by then: kill the kernel rather than wait for it to exit
    # (and for any atexit hook a submission registered).
    config.GuardedExecute.shutdown_kernel = "immediate"
    # nbclient waits only 4 s (iopub_timeout) for a cell's output after its reply and then
    # calls it a timeout: on a loaded machine that fails passing cells.  Allow the cell limit.
    config.GuardedExecute.iopub_timeout = max(4, int(job.cell_timeout))
    # Only an error fails a test cell here: stderr output (a warning) does not, and a
    # number a test cell happens to display is not read as partial credit.
    preprocessors = [
        GuardedExecute if p.__name__ == "Execute" else p for p in _default_autograde_preprocessors()
    ]
    preprocessors = _insert_integrity(preprocessors, integrity.preprocessors())
    if job.sandbox:
        from autograder import sandbox

        sandbox.configure(config, job_dir=job_dir, limits=job.limits or sandbox.Limits())
        preprocessors = [sandbox.executor(p) for p in preprocessors]
    config.Autograde.autograde_preprocessors = preprocessors
    return config, preprocessors


def _marker(job_dir: Path) -> str:
    return f"{os.getpid()}-{job_dir.name}"


def _autograded_dir(job_dir: Path, assignment: str) -> Path:
    """Where nbgrader writes, and executes, the job's notebook in its scratch course."""
    return job_dir / "course" / "autograded" / SCRATCH_STUDENT / assignment


def _spare_key(job: Job) -> Job:
    """What two jobs share when one's spare kernel can serve the other: all but the learner."""
    return replace(job, student="", data=b"", keep_scratch=False)


def _start_spare(job: Job) -> None:
    """Start the kernel for this worker's next job of the same run (see ``spare``)."""
    from autograder import spare

    job_dir = None
    try:
        kernel_name = _kernel_name(job.template / "source" / job.assignment, job.notebook)
        if not kernel_name:
            return
        job_dir = Path(tempfile.mkdtemp(prefix="job-", dir=job.scratch_root))
        shutil.copytree(job.template, job_dir / "course")
        cwd = _autograded_dir(job_dir, job.assignment)  # where nbgrader will run the notebook
        cwd.mkdir(parents=True)
        config, preprocessors = _configure(job, job_dir)
        executor_cls = next(p for p in preprocessors if issubclass(p, GuardedExecute))
        marker = _marker(job_dir)
        spare.start(
            key=_spare_key(job),
            job_dir=job_dir,
            marker=marker,
            executor_cls=executor_cls,
            config=config,
            kernel_name=kernel_name,
            cwd=cwd,
            # as nbgrader's autograde pass sets it, with the next job's marker
            env=dict(os.environ, **{JOB_MARKER: marker, "NBGRADER_EXECUTION": "autograde"}),
        )
    except Exception:  # no spare: the next job starts its own kernel
        spare.discard()
        if job_dir is not None:
            shutil.rmtree(job_dir, ignore_errors=True)


@functools.cache
def _kernel_name(source_dir: Path, notebook: str) -> str | None:
    """The kernel nbgrader runs the assignment with: its source notebook's kernelspec."""
    nb = nbformat.read(source_dir / f"{notebook}.ipynb", as_version=4)
    return nb.metadata.get("kernelspec", {}).get("name")


def score_cells(
    nb: NotebookNode, max_points: dict[str, float], cell_timeout: float | None = None
) -> list[CellResult]:
    """Score every autograded test cell of an executed notebook: full points unless it erred.

    Cells listed in ``max_points`` but absent from the notebook score zero (``missing``).
    """
    found: dict[str, CellResult] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid not in max_points or gid in found or cell.cell_type != "code":
            continue
        pts = max_points[gid]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        flags = []
        if any(OUTPUT_TRUNCATED_NOTE.split(":")[0] in str(o.get("text", "")) for o in cell.outputs):
            flags.append("output truncated")
        if not errors:
            found[gid] = CellResult(gid, pts, pts, "passed", "", flags)
            continue
        timed_out = [e for e in errors if e.get("ename") == "CellTimeoutError"]
        err = timed_out[0] if timed_out else errors[0]
        ename, evalue = str(err.get("ename", "Error")), str(err.get("evalue", ""))
        if ename == "CellTimeoutError":
            limit = f" ({cell_timeout:g} s)" if cell_timeout else ""
            status, message = (
                "timeout",
                f"the cell ran longer than the time limit{limit} and was stopped",
            )
        elif ename == NOT_EXECUTED:
            status, message = "failed", evalue
        else:
            status, message = "failed", f"{ename}: {evalue}" if evalue else ename
        found[gid] = CellResult(gid, 0.0, pts, status, message, flags)
    for gid, pts in max_points.items():
        found.setdefault(gid, CellResult(gid, 0.0, pts, "missing", "this test cell was not found"))
    return [found[gid] for gid in max_points]


DEFAULT_MEMORY_BYTES = 2 * 1024**3


class MemoryWatch(threading.Thread):
    """Enforce a memory limit on all of a job's processes together.

    RLIMIT_AS bounds each process; a submission that forks can still use many times
    the limit.  This thread sums the resident memory of every process that carries
    the job's marker, several times a second, and kills them all past ``limit``.
    """

    def __init__(self, marker: str, limit: int, interval: float = 0.2):
        super().__init__(daemon=True, name="memory-watch")
        self.marker, self.limit, self.interval = marker, limit, interval
        self.fired = False
        self.reason = ""
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            pids = marked_processes(self.marker)
            # Resident sizes count pages that forked processes share once per process;
            # their sum is only an upper bound.  Past the limit, measure the proportional
            # set size (shared pages split between their users) before deciding.
            if sum(_memory_bytes(pid, "VmRSS:") for pid in pids) <= self.limit:
                continue
            used = sum(_memory_bytes(pid, "Pss:", "smaps_rollup") for pid in pids)
            if used > self.limit:
                self.fired = True
                self.reason = (
                    f"its processes used {used / 2**30:.1f} GiB of memory together, over the "
                    f"{self.limit / 2**30:g} GiB limit; the kernel was stopped"
                )
                kill_marked_processes(self.marker)
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def _memory_bytes(pid: int, field: str, table: str = "status") -> int:
    """A memory field (in kB in /proc) of process ``pid``, in bytes; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/{table}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def marked_processes(marker: str | None = None) -> list[int]:
    """Pids of the processes whose initial environment carries ``JOB_MARKER=marker``.

    With no ``marker``: every process started for any grading job.
    """
    prefix = f"{JOB_MARKER}=".encode()
    needle = prefix + marker.encode() if marker is not None else None
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        found = needle in env if needle is not None else any(v.startswith(prefix) for v in env)
        if found:
            pids.append(int(entry.name))
    return pids


def kill_marked_processes(marker: str) -> int:
    """SIGKILL every process whose initial environment carries ``JOB_MARKER=marker``."""
    killed = 0
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


def _default_autograde_preprocessors() -> list[type]:
    from nbgrader.converters import Autograde

    return list(Autograde.class_traits()["autograde_preprocessors"].default())


def _insert_integrity(preprocessors: list[type], extra: list[type]) -> list[type]:
    """Put integrity preprocessors around execution: ``before`` ones first, others after."""
    before = [p for p in extra if getattr(p, "before_execute", False)]
    after = [p for p in extra if not getattr(p, "before_execute", False)]
    i = preprocessors.index(GuardedExecute)
    return preprocessors[:i] + before + [GuardedExecute] + after + preprocessors[i + 1 :]


def _is_solution(gb, name: str, notebook: str, assignment: str) -> bool:
    from nbgrader.api import MissingEntry

    try:
        gb.find_solution_cell(name, notebook, assignment)
        return True
    except MissingEntry:
        return False


def _nbgrader_scores(gb, job: Job) -> dict[str, float]:
    try:
        sub = gb.find_submission_notebook(job.notebook, job.assignment, SCRATCH_STUDENT)
    except Exception:
        return {}
    return {g.name: float(g.auto_score) for g in sub.grades if g.auto_score is not None}


_INVALID_HINTS = (
    "NotJSONError",
    "JSONDecodeError",
    "ValidationError",
    "MissingEntry",
    "Notebook does not appear to be JSON",
    "nbformat",
    "DuplicateIds",
    "exists multiple times",
    "UnicodeDecodeError",
)


def _looks_invalid(log: str) -> bool:
    return any(h.lower() in log.lower() for h in _INVALID_HINTS)


_DUPLICATED = re.compile(r"Cell with id '([^']*)' exists multiple times")


def _summarize_failure(log: str) -> str:
    duplicated = sorted(set(_DUPLICATED.findall(log)))
    if duplicated:  # nbgrader then fails on the copy (it drops only part of its metadata)
        return (
            "the notebook holds more than one copy of the graded cell(s) "
            + ", ".join(f"'{d}'" for d in duplicated)
            + "; nbgrader cannot grade a notebook with a copied graded cell (delete the copy)"
        )
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("[ERROR]") or "Error" in ln]
    text = errors[-1] if errors else (lines[-1] if lines else "nbgrader could not grade it")
    return text.removeprefix("[ERROR] ")[:500]


def result_to_json(result: dict) -> str:
    return json.dumps({k: v for k, v in result.items() if k != "autograded"}, indent=2)
