"""Record finished submissions in the course: results JSON, autograded notebook, gradebook, CSVs.

Only the parent process writes here, each file whole or not at all
(:func:`~autograder.files.write_atomic`).  A result is recorded in two steps:

1. :func:`stage`, as it arrives: its autograded notebook, then ``results/<student>.json``
   marked ``in_gradebook`` false.  From then on no run grades it again: a run killed
   before step 2 leaves it pending, and the next run puts it in the gradebook as it is.
2. :func:`commit`, for a batch of staged results: their gradebook rows in one
   transaction, and once that commit has returned, each JSON marked ``in_gradebook``.
   A result counts as recorded only then.

A gradebook that another program keeps locked is waited for
(:func:`~autograder.grading.gradebook.while_locked`); past the limit, or when the disk
is full, :class:`~autograder.grading.gradebook.RecordError` stops the run, and what it
staged stays pending.  The run's gradebook is held open
(:class:`~autograder.grading.gradebook.OpenGradebook`), a batch in one commit.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

from traitlets.config import Config

from autograder.course import db_url
from autograder.defaults import GRADEBOOK_WAIT
from autograder.files import write_atomic
from autograder.grading.gradebook import (
    OpenGradebook,
    stop_when_disk_full,
    warn,
    while_locked,
)
from autograder.grading.results import CellResult, SubmissionResult
from autograder.record.gradebook_rows import write_batch
from autograder.record.submitted import nbgrader_timestamp, sha256

#: A run commits what it has staged once this many results wait, or once this many
#: seconds have passed since its last commit, whichever comes first (and at its end).
BATCH_SIZE = 200
BATCH_SECONDS = 0.5


def record(
    course: Path,
    config: Config,
    notebook: str,
    test_cells: dict[str, float],
    result: SubmissionResult,
    results_dir: Path,
    *,
    gradebook_wait: float = GRADEBOOK_WAIT,
    notify: Callable[[str], None] = warn,
    books: OpenGradebook | None = None,
) -> None:
    """Record one finished submission at once: :func:`stage` it, then :func:`commit` it.

    ``books`` is the run's open gradebook (default: one opened and closed for this result).
    """
    stage(course, notebook, test_cells, result, results_dir)
    commit(course, config, notebook, [result], results_dir, gradebook_wait, notify, books)


def stage(
    course: Path,
    notebook: str,
    test_cells: dict[str, float],
    result: SubmissionResult,
    results_dir: Path,
) -> None:
    """Write a finished submission's autograded notebook, then its results JSON, pending.

    The JSON says ``in_gradebook`` false until :func:`commit` has put the result in the
    gradebook.  A result with no cells gets each test cell, not graded, with the reason.
    """
    student, assignment = result.student, result.assignment
    if not result.cells:
        reason = result.reason or "not graded"
        result.cells = [CellResult.not_graded(gid, pts, reason) for gid, pts in test_cells.items()]
    result.total()
    result.in_gradebook = False
    with stop_when_disk_full():
        if result.autograded is not None:
            folder = course / "autograded" / student / assignment
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / f"{notebook}.ipynb", result.autograded)
            result.autograded = None
        write_atomic(results_dir / f"{student}.json", result.to_json())


def commit(
    course: Path,
    config: Config,
    notebook: str,
    results: list[SubmissionResult],
    results_dir: Path,
    gradebook_wait: float = GRADEBOOK_WAIT,
    notify: Callable[[str], None] = warn,
    books: OpenGradebook | None = None,
) -> None:
    """Put staged ``results`` in the gradebook in one commit, then mark each JSON so.

    Also serves results that an earlier run staged but did not put in the gradebook.  A
    roster-only student (status ``missing``) gets a ``Student`` row and no submission.
    When the gradebook cannot be written,
    :class:`~autograder.grading.gradebook.RecordError` is raised and every JSON
    stays pending.
    """
    with stop_when_disk_full():
        _write_gradebook(course, config, notebook, results, gradebook_wait, notify, books)
        for result in results:
            result.new_work = False  # the gradebook has it: a rerecord is not new work
            write_atomic(results_dir / f"{result.student}.json", result.to_json())


def _write_gradebook(
    course: Path,
    config: Config,
    notebook: str,
    results: list[SubmissionResult],
    wait: float,
    notify: Callable[[str], None],
    books: OpenGradebook | None = None,
) -> None:
    """Write the scores in one transaction, retrying with a growing pause while the
    gradebook is locked."""
    if books is None:
        with OpenGradebook(db_url(course, config), config) as own:
            return _write_gradebook(course, config, notebook, results, wait, notify, own)

    def write() -> None:
        with books.transaction() as gb:
            write_batch(gb, config, notebook, results)

    while_locked(write, books, wait, notify, "write")
    for result in results:
        result.in_gradebook = True


def load_result(path: Path) -> SubmissionResult | None:
    """The result recorded at ``path``, or None (unreadable, or of another schema)."""
    try:
        return SubmissionResult.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_results(results_dir: Path) -> dict[str, SubmissionResult]:
    """Every result recorded in ``results_dir``, by student."""
    found = (load_result(path) for path in sorted(results_dir.glob("*.json")))
    return {r.student: r for r in found if r is not None}


#: What cells.csv's ``flags`` say of a cell a grader scored, and of one that waits for one.
SCORED_BY_HAND = "scored by hand"
WAITS_FOR_REVIEW = "waits for grading by hand"


def write_csvs(reports: Path, results: dict[str, SubmissionResult]) -> None:
    """Write grades.csv and cells.csv for every student graded so far (each whole or not).

    ``results`` are the final grades (read over the gradebook): a cell a grader scored,
    or one that waits for a grader, says so among its flags.
    """
    reports.mkdir(parents=True, exist_ok=True)
    students = sorted(results)
    grades = [["student", "score", "max_score", "status"]]
    cells = [["student", "grade_id", "score", "max_score", "status", "flags"]]
    for s in students:
        r = results[s]
        grades.append([s, _num(r.score), _num(r.max_score), r.status.value])
        for c in r.cells:
            review = [SCORED_BY_HAND] * c.manual + [WAITS_FOR_REVIEW] * c.waiting
            flags = "; ".join([*r.flags, *c.flags, *review])
            cells.append([s, c.grade_id, _num(c.score), _num(c.max_score), c.status.value, flags])
    for name, rows in (("grades.csv", grades), ("cells.csv", cells)):
        text = io.StringIO(newline="")
        csv.writer(text).writerows(rows)
        write_atomic(reports / name, text.getvalue())


def written_by_grader(previous: SubmissionResult, notebook: str) -> dict[str, str]:
    """``file name -> sha256`` of what an earlier run stored in ``submitted/`` for ``previous``.

    The key starts with the submission's hash, and the stored notebook is those bytes;
    ``timestamp.txt`` holds the recorded time in nbgrader's format.
    """
    ours = {f"{notebook}.ipynb": previous.key.split(":", 1)[0]} if previous.key else {}
    if previous.identity.timestamp is not None:
        stamp = nbgrader_timestamp(previous.identity.timestamp).encode()
        ours["timestamp.txt"] = sha256(stamp)
    return ours


def _num(x: float) -> str:
    return f"{float(x):g}"
