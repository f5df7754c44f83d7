"""``specdec-course release``: generate learner notebooks, and refuse a bad release.

The release is generated with nbgrader's ``generate_assignment`` into a staging
folder, checked, and only then copied to ``release/<assignment>/``.  It is refused
(nothing in ``release/`` changes) when:

* anything leaks: solution or hidden-test markers, ``specdec_reference``, or a line of
  solution code, in a notebook or any text file beside it (Python files are refused);
* a demonstration cell is marked so that skipping it could change a grade
  (:func:`autograder.demonstrations.mark_problems`);
* the source notebook does not autograde to full marks;
* the release notebook does not autograde to zero on every autograded cell;
* a cell's score of either depends on whether the demonstrations run: both are graded
  twice, skipping them (as ``grade`` does) and running every cell.

A written answer (nbgrader's "manually graded answer") is neither: only a person scores
it, so the self-check leaves it out and says how many points it left to the graders.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from autograder.course import (
    UsageError,
    assignments,
    find_course,
    load_config,
    nbgrader_api,
    scratch_dir,
)
from autograder.demonstrations import mark_problems, source_skipped_ids
from autograder.files import write_atomic
from autograder.grading.job import Job
from autograder.grading.pool import run_jobs
from autograder.grading.results import SubmissionResult
from autograder.grading.template import (
    build_template,
    mark_synced,
    source_hash,
    template_by_hand_cells,
    template_test_cells,
)
from autograder.sandbox import sandbox_problem

if TYPE_CHECKING:
    from traitlets.config import Config

#: Text that must never reach learners.
FORBIDDEN = (
    "BEGIN SOLUTION",
    "END SOLUTION",
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    "specdec_reference",
)
#: Solution lines shorter than this are too generic to count as a leak (``return x``).
MIN_LEAK_LINE = 24


class ReleaseError(Exception):
    """The release was refused; the message lists every reason."""


@dataclass
class ReleaseReport:
    assignment: str
    notebooks: list[Path] = field(default_factory=list)
    source_scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    release_scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: points graded by hand (written answers), by notebook: the self-check scores none
    by_hand: dict[str, float] = field(default_factory=dict)


def release(
    assignment: str | None = None,
    *,
    course: Path | str | None = None,
    all: bool = False,  # noqa: A002  (mirrors the CLI's --all)
    check: bool = True,
    sandbox: bool | None = None,
) -> list[ReleaseReport]:
    """Generate ``release/`` for one assignment (or ``all``), refusing a bad one.

    ``check`` autogrades the source and the release to prove full marks and zero; the
    checks of every assignment share one worker pool.  ``sandbox`` runs them in the
    sandbox (default: when it can run here).  Assignments are released in order, up to
    the first that is refused (:class:`ReleaseError`).
    """
    root = find_course(course)
    if all:
        targets = assignments(root)
    elif assignment:
        targets = [assignment]
    else:
        raise UsageError("name an assignment or pass --all")
    for name in targets:
        if not (root / "source" / name).is_dir():
            raise UsageError(f"unknown assignment {name!r} (known: {', '.join(assignments(root))})")
    stages: list[_Stage] = []
    try:
        for name in targets:
            stages.append(_stage(root, name))
            if stages[-1].problems:
                break  # nothing after a refused assignment is released
        if check:
            _self_check(root, [s for s in stages if not s.problems], sandbox)
        return [_install(root, stage) for stage in stages]
    finally:
        for stage in stages:
            shutil.rmtree(stage.staging, ignore_errors=True)


@dataclass
class _Stage:
    """One assignment generated into a staging folder, not yet in ``release/``."""

    report: ReleaseReport
    staging: Path
    problems: list[str] = field(default_factory=list)

    @property
    def generated(self) -> Path:
        return self.staging / self.report.assignment


def _stage(root: Path, assignment: str) -> _Stage:
    """Generate ``assignment`` into a staging folder and look for leaks.

    nbgrader's ``generate_assignment`` also records the assignment in the course
    gradebook, which is what ``grade``'s gradebook sync would do: it is stamped as synced.
    """
    staging = Path(tempfile.mkdtemp(prefix="release-", dir=scratch_dir(root)))
    stage = _Stage(ReleaseReport(assignment), staging)
    config = load_config(root)
    problem = generate(root, assignment, staging, config)
    if problem:
        stage.problems.append(problem)
        return stage
    mark_synced(root, assignment, source_hash(root, assignment), config)
    stage.problems += leak_problems(root / "source" / assignment, stage.generated)
    for path in sorted((root / "source" / assignment).glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        stage.problems += [f"{path.name}: {p}" for p in mark_problems(cells)]
    return stage


def generate(root: Path, assignment: str, staging: Path, config: Config) -> str | None:
    """Generate ``assignment`` with nbgrader's ``generate_assignment`` into
    ``staging/<assignment>/`` (``staging`` is a folder under the course ``root``), and
    normalize its notebooks as ``release/`` holds them.

    ``config`` is the course's (:func:`~autograder.course.load_config`); its gradebook
    (``CourseDirectory.db_url``) records the assignment.  Returns why nbgrader could not
    generate it, or None.
    """
    config.CourseDirectory.release_directory = str(staging.relative_to(root))
    outcome = nbgrader_api(config).generate_assignment(assignment, force=True, create=True)
    if not outcome.get("success"):
        return (
            f"nbgrader could not generate {assignment}:\n{outcome.get('log', '')}"
            f"{outcome.get('error', '')}"
        )
    for path in (staging / assignment).glob("*.ipynb"):
        _normalize(path)
    return None


def _install(root: Path, stage: _Stage) -> ReleaseReport:
    """Copy a checked stage to ``release/<assignment>/``, or refuse it."""
    assignment = stage.report.assignment
    if stage.problems:
        raise ReleaseError(
            f"release of {assignment} refused; release/{assignment} was left unchanged:\n"
            + "\n".join(f"  - {p}" for p in stage.problems)
        )
    target = root / "release" / assignment
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(stage.generated, target)
    stage.report.notebooks = sorted(target.glob("*.ipynb"))
    return stage.report


def _normalize(path: Path) -> None:
    """Strip outputs, execution counts and volatile metadata, so release/ diffs stay clean."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata = {k: v for k, v in nb.metadata.items() if k == "kernelspec"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in ("execution", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
    write_atomic(path, nbformat.writes(nb) + "\n")  # ends in a newline, as nbformat.write's


def leak_problems(source: Path, release_dir: Path) -> list[str]:
    """Everything in ``release_dir`` that learners must not see."""
    return scan_for_leaks(release_dir, sorted(release_dir.rglob("*")), solution_lines(source))


def scan_for_leaks(root: Path, paths: Iterable[Path], solution: set[str]) -> list[str]:
    """What learners must not see in ``paths``, files under ``root`` (named relative to it).

    A Python file is refused whole (it could carry a solution).  Any other text file, and
    a notebook's cells, must hold no :data:`FORBIDDEN` word and no line of ``solution``
    (:func:`solution_lines`).  Binary files (images, arrays) are not read.
    """
    problems = []
    for path in paths:
        if not path.is_file():
            continue
        name = path.relative_to(root).as_posix()
        if path.suffix == ".py":
            problems.append(f"{name}: Python files are not released (solutions could leak)")
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary data files (images, arrays) are fine
        body = text
        if path.suffix == ".ipynb":
            try:
                nb = nbformat.reads(text, as_version=4)
            except Exception as exc:  # not JSON, or not a notebook
                problems.append(f"{name}: not a readable notebook ({exc})")
                continue
            body = "\n".join(cell.source for cell in nb.cells)
        for word in FORBIDDEN:
            if word in text or word in body:
                problems.append(f"{name}: contains {word!r}")
        leaked = sorted(solution & {line.strip() for line in body.splitlines()})
        for line in leaked[:5]:
            problems.append(f"{name}: solution code leaked: {line!r}")
    return problems


def solution_lines(source: Path) -> set[str]:
    """Distinctive lines of solution code (inside solution blocks) in the source notebooks.

    Short lines (``return x``) and comments are left out: they are too generic to count.
    """
    lines = set()
    block = re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.S)
    for path in source.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for chunk in block.findall(cell.source):
                lines.update(ln.strip() for ln in chunk.splitlines())
    return {ln for ln in lines if len(ln) >= MIN_LEAK_LINE and not ln.startswith("#")}


def _self_check(root: Path, stages: list[_Stage], sandbox: bool | None) -> None:
    """Autograde each stage's source (full marks) and release (zero), in one worker pool,
    skipping the demonstrations as ``grade`` does and, where a notebook has some, once
    more running every cell (the same score in every cell); what fails is added to the
    stage's problems."""
    if not stages:
        return
    if sandbox is None:
        sandbox = sandbox_problem() is None
    run_root = Path(tempfile.mkdtemp(prefix="selfcheck-", dir=scratch_dir(root)))
    try:
        jobs = []
        templates = {}
        by_assignment = {stage.report.assignment: stage for stage in stages}
        for assignment, stage in by_assignment.items():
            template, _ = build_template(root, assignment)
            templates[assignment] = template
            released = sorted(stage.generated.glob("*.ipynb"))
            if len(released) > 1:
                raise UsageError("multi-notebook assignments are not supported by the self-check")
            for path in released:
                source_nb = root / "source" / assignment / path.name
                both_ways = (False, True) if source_skipped_ids(source_nb) else (False,)
                for student, nb_path in (("source-solution", source_nb), ("release-blank", path)):
                    for run_demos in both_ways:
                        jobs.append(
                            Job(
                                assignment=assignment,
                                student=student,
                                notebook=path.stem,
                                data=nb_path.read_bytes(),
                                template=template,
                                scratch_root=run_root,
                                sandbox=sandbox,
                                run_demos=run_demos,
                            )
                        )
        results: dict[tuple[str, str, str], dict[bool, SubmissionResult]] = {}
        for job, result in run_jobs(jobs, workers=2, hard_timeout=600):
            stage = by_assignment[job.assignment]
            results.setdefault((job.assignment, job.notebook, job.student), {})[job.run_demos] = (
                result
            )
            if not job.run_demos:
                stage.problems += _check_problems(
                    templates[job.assignment], stage.report, job, result
                )
        for (assignment, notebook, student), ways in sorted(results.items()):
            if len(ways) == 2:
                by_assignment[assignment].problems += both_ways_problems(
                    f"{notebook}.ipynb, {student}", ways[False], ways[True]
                )
    finally:
        shutil.rmtree(run_root, ignore_errors=True)


def both_ways_problems(
    what: str, skipping: SubmissionResult, running: SubmissionResult
) -> list[str]:
    """Every cell whose score differs between grading ``what`` skipping the demonstrations
    and running every cell."""
    ran = {c.grade_id: c for c in running.cells}
    problems = []
    for cell in skipping.cells:
        other = ran.get(cell.grade_id)
        if other is None or other.score != cell.score:
            problems.append(
                f"{what}: {cell.grade_id} scores {cell.score:g} with the demonstrations "
                f"skipped and {'nothing' if other is None else f'{other.score:g}'} with every "
                f"cell run ({(other.message if other else '') or cell.message or 'no message'})"
            )
    return problems


def _check_problems(
    template: Path, report: ReleaseReport, job: Job, result: SubmissionResult
) -> list[str]:
    """What the self-check's ``result`` for ``job`` says is wrong (recording its score)."""
    cells = template_test_cells(template, job.assignment, job.notebook)
    got = {c.grade_id: c for c in result.cells}
    if not got:
        return [f"{job.student}: could not be graded: {result.reason}"]
    score = sum(c.score for c in got.values())
    total = sum(cells.values())
    problems = []
    report.by_hand[job.notebook] = sum(
        template_by_hand_cells(template, job.assignment, job.notebook).values()
    )
    if job.student == "source-solution":
        report.source_scores[job.notebook] = (score, total)
        for gid in cells:
            c = got.get(gid)
            if not c or c.score < c.max_score:
                msg = c.message if c else "missing"
                problems.append(f"source does not pass {gid}: {msg}")
    else:
        report.release_scores[job.notebook] = (score, total)
        for gid in cells:
            c = got.get(gid)
            if c and c.score > 0:
                problems.append(f"blank release scores {c.score:g} on {gid} (must be 0)")
    return problems
