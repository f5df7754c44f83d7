"""The record step of a ``grade`` run: each result into the course as it arrives.

:class:`Recorder` is the only writer of the course's gradebook, ``autograded/`` and
``reports/<assignment>/`` during a run (through :mod:`autograder.record.store`): each
result, as it arrives, gets its key and who the student is, and is staged
(``autograded/``, ``results/<student>.json`` pending); the staged results go into the
gradebook a batch per commit, and then each gets its feedback page
(:mod:`autograder.record.page_writer`).  :func:`store_all_submitted` puts what the
students sent in nbgrader's ``submitted/`` (:mod:`autograder.record.submitted`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from traitlets.config import Config

from autograder.course import db_url
from autograder.grading.gradebook import OpenGradebook, stop_when_disk_full
from autograder.grading.plan import Action, Decision, Plan
from autograder.grading.results import GradeResult, Status, SubmissionResult
from autograder.grading.template import template_test_cells
from autograder.intake.collect import Collected
from autograder.record.page_writer import PageWriter
from autograder.record.store import (
    BATCH_SECONDS,
    BATCH_SIZE,
    commit,
    load_result,
    stage,
    written_by_grader,
)
from autograder.record.submitted import store_submitted
from autograder.render.feedback_page import page_path


def store_all_submitted(root: Path, assignment: str, notebook: str, decided: Plan) -> None:
    """Put what the students sent in ``submitted/`` (never over what others wrote there)."""
    for decision in decided.decisions:
        sub = decision.sub
        if decision.action is Action.KEEP or sub.missing:
            continue
        ours = written_by_grader(decision.earlier, notebook) if decision.earlier else {}
        with stop_when_disk_full():
            sub.flags.extend(store_submitted(root, assignment, notebook, sub, ours))


@dataclass
class Recorder:
    """The record step: each student's result into the course, and their feedback page.

    Results are staged as they arrive, and committed to the gradebook together once
    :data:`~autograder.record.store.BATCH_SIZE` wait or
    :data:`~autograder.record.store.BATCH_SECONDS` have passed since the last commit:
    a class graded slowly commits each result as it comes, and one graded fast commits
    in batches.
    """

    out: GradeResult
    config: Config
    notebook: str
    test_cells: dict[str, float]
    gradebook_wait: float
    notify: Callable[[str], None]
    books: OpenGradebook  #: the course's gradebook, open for the whole run
    pages: PageWriter | None  #: the run's feedback pages (None: ``feedback`` is off)
    #: staged results waiting for the gradebook, with their decisions
    staged: list[tuple[Decision, SubmissionResult]] = field(default_factory=list)
    committed_at: float = field(default_factory=time.monotonic)
    #: kept results whose page is missing (a run stopped before writing it)
    unpaged: list[str] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        stack: ExitStack,
        out: GradeResult,
        config: Config,
        notebook: str,
        template: Path,
        feedback: bool,
        gradebook_wait: float,
        notify: Callable[[str], None],
    ) -> Recorder:
        """The recorder of ``out``'s run, its ``results/`` folder made; ``stack`` closes
        its gradebook."""
        out.results_dir.mkdir(parents=True, exist_ok=True)
        cells = template_test_cells(template, out.assignment, notebook)
        books = stack.enter_context(OpenGradebook(db_url(out.course, config), config))
        pages = stack.enter_context(PageWriter(out.course, out.assignment)) if feedback else None
        return cls(out, config, notebook, cells, gradebook_wait, notify, books, pages)

    def earlier(self, collected: Collected) -> dict[str, SubmissionResult | None]:
        """What earlier runs recorded for each student of the class (None: nothing readable)."""
        folder = self.out.results_dir
        return {s.student: load_result(folder / f"{s.student}.json") for s in collected.submissions}

    def record(self, decision: Decision, graded: SubmissionResult | None = None) -> list[str]:
        """Stage ``decision``'s result (its key, who the student is), and commit what is
        staged when it is time; return the students whose new results that committed.

        A kept result is recorded again only when ``decision.rerecord``, and gets no page.
        """
        if decision.action is Action.KEEP and not decision.rerecord:
            self._reused(decision)
            return []
        result = decision.recorded(graded)
        stage(self.out.course, self.notebook, self.test_cells, result, self.out.results_dir)
        self.staged.append((decision, result))
        due = time.monotonic() - self.committed_at >= BATCH_SECONDS
        return self.commit() if due or len(self.staged) >= BATCH_SIZE else []

    def commit(self) -> list[str]:
        """Put every staged result in the gradebook (one commit), then have the pages of
        the new ones written; return those students."""
        batch, self.staged = self.staged, []
        if batch:
            results = [result for _, result in batch]
            course, results_dir = self.out.course, self.out.results_dir
            wait, notify, books = self.gradebook_wait, self.notify, self.books
            commit(course, self.config, self.notebook, results, results_dir, wait, notify, books)
            self.committed_at = time.monotonic()
        new, pages = [], []
        for decision, result in batch:
            if result.review:
                self.out.to_review[decision.student] = list(result.review)
            if decision.action is Action.KEEP:
                self._reused(decision)
                continue
            new.append(decision.student)
            if result.status is not Status.MISSING:
                pages.append(decision.student)
        pages, self.unpaged = pages + self.unpaged, []
        if self.pages is not None and pages:
            self.pages.write(pages)
        self.out.graded_now.extend(new)
        return new

    def _reused(self, decision: Decision) -> None:
        """Count a kept result as reused, noting its feedback page if an earlier run did
        not write it."""
        self.out.reused.append(decision.student)
        kept = decision.result
        if self.pages is None or kept is None or kept.status is Status.MISSING:
            return
        page = page_path(self.out.course, self.out.assignment, kept.student, self.notebook)
        if not page.exists():
            self.unpaged.append(kept.student)
