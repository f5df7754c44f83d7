"""pytest's hooks for this suite (no skips, markers), and the fixtures shared by its files.

The helpers these are built from live in ``tests/support/``; test files import them from
there, never from this file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from hypothesis import settings
from support.course import (
    FILES,
    MINI_SOURCE,
    REPO,
    job_factory,
    new_course,
    ready_mini_course,
    released_notebook,
    sandbox_available,
)

from autograder.course import assignments
from autograder.grading.results import SubmissionResult

#: Every lesson in ``source/``.
LESSONS = assignments(REPO)

#: The markers, and the tripwires that fail a test which starts what it is not marked for;
#: how xdist shares the files among its workers.
pytest_plugins = ["support.markers", "support.scheduling"]

#: Hypothesis checks no time per example: the suite asserts no timing (timings are
#: benchmarks), and its kernels share the cores with every test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

#: The one way to let tests skip: set to 1 on a machine that cannot run unprivileged user
#: namespaces, and the tests marked ``sandbox`` may skip there (the summary says how
#: many).  Any other skip, and any skip without it, fails the run.  CI never sets it.
WITHOUT_SANDBOX_ENV = "SPECDEC_TEST_WITHOUT_SANDBOX"


def _skips(config) -> tuple[list, list]:
    """(skips the opt-out allows, skips that fail the run) among this session's reports."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    opted_out = os.environ.get(WITHOUT_SANDBOX_ENV) == "1"
    allowed = [r for r in reports if opted_out and "sandbox" in getattr(r, "keywords", {})]
    return allowed, [r for r in reports if r not in allowed]


def pytest_sessionfinish(session, exitstatus):
    """A test that skipped did not run: a run with an unexpected skip fails."""
    if exitstatus == pytest.ExitCode.OK and _skips(session.config)[1]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    allowed, refused = _skips(config)
    if allowed:
        terminalreporter.write_line(
            f"NOT TESTED: {len(allowed)} sandbox test(s) skipped because "
            f"{WITHOUT_SANDBOX_ENV}=1 (this machine cannot run the grading sandbox)",
            yellow=True,
            bold=True,
        )
    if refused:
        terminalreporter.write_line(
            f"FAILED: {len(refused)} test(s) skipped; a skipped test did not run, so the run "
            f"fails (only sandbox tests may skip, with {WITHOUT_SANDBOX_ENV}=1):",
            red=True,
            bold=True,
        )
        for report in refused:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            terminalreporter.write_line(f"  {report.nodeid}: {reason}", red=True)


@pytest.fixture(scope="session")
def pristine_mini_course(tmp_path_factory) -> Path:
    """The `mini` course released, its template built and its gradebook synced, once.

    Never graded nor written by a test: :func:`mini_course` hands out copies of it.
    """
    return ready_mini_course(tmp_path_factory.mktemp("pristine") / "course")


@pytest.fixture
def mini_course(pristine_mini_course, tmp_path) -> Path:
    """A course of this test's own holding the tiny `mini` assignment (no numpy: fast
    kernels), released and ready to grade: a copy of :func:`pristine_mini_course`."""
    return Path(shutil.copytree(pristine_mini_course, tmp_path / "course", symlinks=True))


@pytest.fixture
def unreleased_mini_course(tmp_path) -> Path:
    """A course holding only the `mini` source: nothing released, built or synced yet."""
    return new_course(tmp_path / "course", {"mini": MINI_SOURCE})


@pytest.fixture(scope="session")
def mini_release(pristine_mini_course) -> nbformat.NotebookNode:
    """The learner's `mini` notebook, as released (fill a copy: :func:`support.course.fill`)."""
    return released_notebook(pristine_mini_course, "mini", "mini")


@pytest.fixture
def spares():
    """This test's worker: the holder of its spare kernel and warm parents, emptied after."""
    from autograder.grading.spare import SpareKernels

    holder = SpareKernels()
    yield holder
    holder.discard()
    holder.warm.close()


@pytest.fixture
def jobs(mini_course, tmp_path):
    """A factory of sandboxed jobs for the mini course: ``jobs(student, **cell_sources)``."""
    return job_factory(mini_course, tmp_path / "scratch")


# ---------------------------------------------------------------------------------------
# Every lesson, released and its samples graded once for the whole run
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def lesson_course(tmp_path_factory) -> Path:
    """A copy of the real course (config + every lesson's source) in a temp folder."""
    root = tmp_path_factory.mktemp("lessons") / "course"
    return new_course(root, {a: REPO / "source" / a for a in LESSONS})


@pytest.fixture(scope="session")
def releases(lesson_course) -> dict:
    """Release every lesson, without the self-check: each lesson's ``reference`` and ``blank``
    samples, in :func:`graded_lessons`, are the notebooks it would grade (the source's
    solutions in the release, and the release itself), and ``test_release.py`` tests the
    self-check on ``mini``."""
    from autograder.release import release

    return {r.assignment: r for r in release(course=lesson_course, all=True, check=False)}


@pytest.fixture(scope="session")
def graded_lessons(lesson_course, releases) -> dict[str, dict[str, SubmissionResult]]:
    """Every lesson's sample submissions graded once, forked, with feedback pages:
    ``{assignment: {student: result}}``.  Tests read it; none grades it again."""
    from autograder.grade import grade

    return {
        a: grade(
            a,
            submissions=FILES / a / "submissions",
            course=lesson_course,
            workers=2,
            sandbox=sandbox_available(),
        ).results
        for a in LESSONS
    }


@pytest.fixture(scope="session")
def one_lesson_course(lesson_course):
    """``one_lesson_course(assignment, root)``: a new course at ``root`` holding one lesson,
    with the grading template that :func:`lesson_course` built for it copied in (nbgrader's
    ``generate_assignment`` runs once per lesson per session, not once per course)."""
    from autograder.course import scratch_dir
    from autograder.grading.template import build_template

    def make(assignment: str, root: Path) -> Path:
        template, _ = build_template(lesson_course, assignment)
        course = new_course(root, {assignment: REPO / "source" / assignment})
        shutil.copytree(template, scratch_dir(course) / "templates" / template.name, symlinks=True)
        return course

    return make


@pytest.fixture(scope="session")
def graded_e7_2_fresh(tmp_path_factory, one_lesson_course) -> dict[str, SubmissionResult]:
    """Every E7.2 sample graded again with kernels started fresh (``--no-fork``)."""
    from autograder.grade import Harness, grade

    assignment = "e7_2_acceptance_tests"
    course = one_lesson_course(assignment, tmp_path_factory.mktemp("fresh") / "course")
    return grade(
        assignment,
        submissions=FILES / assignment / "submissions",
        course=course,
        workers=2,
        sandbox=sandbox_available(),
        fork=False,
        harness=Harness(feedback=False),
    ).results
