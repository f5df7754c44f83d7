"""A run's feedback pages, written beside the recording rather than in its way.

``grade`` hands :class:`PageWriter` the students of each gradebook commit.  One student
at a time (a class graded slowly) is written at once, in the ``grade`` process.  A
batch (a class graded fast) goes to a second process, so that rendering runs on another
core while the run records the next results; every page is written before ``grade``
returns (:meth:`PageWriter.close`).

A page that cannot be written costs no grade: a warning names the student.  A full disk
stops the run with :class:`~autograder.grading.gradebook.RecordError`, raised in ``grade``
at its next commit or at its end.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from autograder.grading.gradebook import RecordError, stop_when_disk_full
from autograder.record.submitted import copy_exchange_files
from autograder.render.feedback_page import write_pages
from autograder.render.page import release_notebooks


def write_feedback(course: Path, assignment: str, students: list[str]) -> None:
    """Write each student's feedback page and the files ``release_feedback`` reads.

    A full disk raises :class:`RecordError`; another error is a warning on stderr.
    """
    try:
        releases = release_notebooks(course, assignment)
    except Exception:  # each page then says why, as it would outside a run
        releases = None
    for student in students:
        try:
            with stop_when_disk_full():
                write_pages(course, assignment, student=student, releases=releases)
                copy_exchange_files(course, assignment, student)
        except RecordError:
            raise
        except Exception as exc:  # a page that cannot be written costs no grade
            print(f"warning: no feedback page for {student}: {exc}", file=sys.stderr, flush=True)


class PageWriter:
    """The feedback pages of one ``grade`` run; use it as a context manager, or
    :meth:`close` it, which waits for every page."""

    def __init__(self, course: Path, assignment: str) -> None:
        self.course, self.assignment = course, assignment
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[Future] = []

    def write(self, students: list[str]) -> None:
        """Write these students' pages: at once for one, in the second process for more.

        Raises the :class:`RecordError` of a batch written earlier, if one stopped.
        """
        self._check(wait=False)
        if len(students) <= 1:
            write_feedback(self.course, self.assignment, students)
            return
        if self._pool is None:
            context = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        self._pending.append(
            self._pool.submit(write_feedback, self.course, self.assignment, students)
        )

    def close(self) -> None:
        """Wait for every page; raise the first :class:`RecordError`, if any."""
        try:
            self._check(wait=True)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def _check(self, *, wait: bool) -> None:
        """Drop the batches written (all of them when ``wait``); raise a failed one's error."""
        still = []
        for future in self._pending:
            if wait or future.done():
                future.result()  # a batch's RecordError (or a broken process) surfaces here
            else:
                still.append(future)
        self._pending = still

    def __enter__(self) -> PageWriter:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(Exception):  # the run's own error is the one to tell
            self.close()
