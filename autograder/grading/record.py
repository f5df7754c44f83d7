"""Record finished submissions in the course: results JSON, autograded notebook, gradebook, CSVs.

Only the parent process writes here, each file whole or not at all
(:func:`~autograder.files.write_atomic`).  A result is recorded in two steps:

1. :func:`stage`, as it arrives: its autograded notebook, then ``results/<student>.json``
   marked ``in_gradebook`` false.  From then on no run grades it again: a run killed
   before step 2 leaves it pending, and the next run puts it in the gradebook as it is.
2. :func:`commit`, for a batch of staged results: their gradebook rows in one
   transaction, and once that commit has returned, each JSON marked ``in_gradebook``.
   A result counts as recorded only then.

A gradebook that another program (the formgrader) keeps locked is waited for, with a
bounded back-off; past the limit, or when the disk is full, :class:`RecordError` stops
the run, and what it staged stays pending.

A run keeps the gradebook open (:class:`OpenGradebook`): nbgrader's ``Gradebook`` makes a
database engine and checks every table when it opens, and an engine kept open compiles
each statement once.  nbgrader's methods commit as they go; inside
:meth:`OpenGradebook.transaction` those commits are held back, so that a batch costs one
commit (one ``fsync`` for SQLite).  An error closes the gradebook, so the next attempt
opens it anew.
"""

from __future__ import annotations

import contextlib
import csv
import io
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning
from sqlalchemy.orm import scoped_session, sessionmaker
from traitlets.config import Config

from autograder.course import db_url, gradebook
from autograder.files import is_disk_full, write_atomic
from autograder.grading.gradebook_rows import write_batch
from autograder.grading.results import CellResult, SubmissionResult
from autograder.intake.collect import Submission
from autograder.intake.submitted import nbgrader_timestamp, sha256

#: Seconds to wait, by default, for a gradebook that another program keeps locked.
GRADEBOOK_WAIT = 120.0
#: A run commits what it has staged once this many results wait, or once this many
#: seconds have passed since its last commit, whichever comes first (and at its end).
BATCH_SIZE = 200
BATCH_SECONDS = 0.5

T = TypeVar("T")


class RecordError(Exception):
    """The course could not be written: its gradebook stayed locked, or its disk is full.

    ``grade`` stops at the first one.  Everything recorded before is intact, and running
    the same command again finishes the batch, regrading nothing already graded.
    """


def warn(message: str) -> None:
    """The default ``notify``: a warning line on stderr."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


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
    When the gradebook cannot be written, :class:`RecordError` is raised and every JSON
    stays pending.
    """
    with stop_when_disk_full():
        _write_gradebook(course, config, notebook, results, gradebook_wait, notify, books)
        for result in results:
            result.new_work = False  # the gradebook has it: a rerecord is not new work
            write_atomic(results_dir / f"{result.student}.json", result.to_json())


@contextlib.contextmanager
def stop_when_disk_full() -> Iterator[None]:
    """Turn a write that failed for lack of space into a :class:`RecordError` with the reason."""
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise RecordError(f"the disk is full: cannot write{where}: {exc.strerror}") from exc


class OpenGradebook:
    """The course's gradebook, opened at its first use and kept open until :meth:`close`.

    After an error, :meth:`discard` rolls back and closes it; the next :meth:`get` opens it
    anew, so a retry starts from a fresh connection.
    """

    def __init__(self, url: str, config: Config) -> None:
        self.url, self.config = url, config
        self._gradebook: Gradebook | None = None

    def get(self) -> Gradebook:
        """The open gradebook, opened now if it is not."""
        if self._gradebook is None:
            self._gradebook = gradebook(self.url, self.config)
        return self._gradebook

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Gradebook]:
        """The open gradebook, with the commits that nbgrader's methods make in it held back
        until the block ends, where they become one commit; an error rolls back them all.

        nbgrader's session is bound, for the block, to a connection whose transaction it
        joins in SQLAlchemy's ``rollback_only`` mode: its commits only flush.
        """
        gb = self.get()
        plain = gb.db
        with gb.engine.connect() as connection:
            outer = connection.begin()
            gb.db = scoped_session(
                sessionmaker(bind=connection, autoflush=True, join_transaction_mode="rollback_only")
            )
            try:
                yield gb
                gb.db.flush()
                outer.commit()
            except BaseException:
                with contextlib.suppress(Exception):  # the connection may be broken already
                    outer.rollback()
                raise
            finally:
                gb.db.remove()
                gb.db = plain

    def discard(self) -> None:
        """Roll back what is not committed, and close the gradebook."""
        if self._gradebook is not None:
            gb, self._gradebook = self._gradebook, None
            with contextlib.suppress(Exception):  # the connection may be broken already
                gb.db.rollback()
            with contextlib.suppress(Exception):
                gb.close()

    close = discard

    def __enter__(self) -> OpenGradebook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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


def while_locked(
    action: Callable[[], T],
    books: OpenGradebook,
    wait: float,
    notify: Callable[[str], None],
    verb: str = "read",
) -> T:
    """``action()``, run again with a growing pause while another program keeps the
    gradebook locked, for at most ``wait`` seconds; then :class:`RecordError`.

    After any error the gradebook is discarded, so that each attempt opens it anew.
    """
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own session warnings
    url = books.url
    started, pause = time.monotonic(), 0.5
    while True:
        try:
            return action()
        except Exception as exc:
            books.discard()
            if is_disk_full(exc):
                raise RecordError(f"the disk is full: cannot {verb} the gradebook {url}") from exc
            if not _locked(exc):
                raise
            waited = time.monotonic() - started
            if waited >= wait:
                raise RecordError(
                    f"the gradebook {url} stayed locked by another program for {waited:.0f} s "
                    f"(limit {wait:g} s, --gradebook-wait); close what holds it (the formgrader?)"
                ) from exc
            pause = min(2 * pause, 10.0, max(wait - waited, 0.1))
            notify(
                f"the gradebook is locked by another program (the formgrader?); waited "
                f"{waited:.0f} s, retrying in {pause:.0f} s (for at most {wait:g} s in all)"
            )
            time.sleep(pause)


def _locked(exc: BaseException) -> bool:
    """True when sqlite said the database is locked (nbgrader may wrap its error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if "database is locked" in str(seen) or "database table is locked" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
    if previous.timestamp:
        stamp = nbgrader_timestamp(datetime.fromisoformat(previous.timestamp)).encode()
        ours["timestamp.txt"] = sha256(stamp)
    return ours


def result_key(sub: Submission, template_hash: str, timeout: float, sandbox: bool) -> str:
    """What a recorded result was graded from; a different key means grade it again."""
    return f"{sub.sha256}:{template_hash}:{timeout:g}:{int(sandbox)}"


def _num(x: float) -> str:
    return f"{float(x):g}"
