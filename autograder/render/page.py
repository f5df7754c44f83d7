"""What the feedback pages and the report share: their inputs from the course and the page shell.

Inputs: the recorded results, the release notebooks (or the learner's view of the source).
Output: a Jinja template of ``autograder/render/templates`` with the shared style sheet,
and the small formatting helpers both pages use.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jinja2
import nbformat
from markupsafe import Markup
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
from pygments.formatters import HtmlFormatter

from autograder.cells import is_test_cell, nbgrader_meta
from autograder.course import UsageError, load_config
from autograder.grading.gradebook_grades import final_results
from autograder.grading.results import Status, SubmissionResult

#: Longest cell source or message shown on a page; a flooded submission stays readable.
MAX_SOURCE_CHARS = 20_000


MAX_MESSAGE_CHARS = 4_000


#: Human labels (text, symbol) for a submission's and a test cell's status.
SUBMISSION_STATUS = MappingProxyType(
    {
        Status.GRADED: "Graded",
        Status.FAILED: "Grading failed",
        Status.TIMEOUT: "Timed out",
        Status.INVALID: "Invalid submission",
        Status.MISSING: "No submission",
    }
)


def render_page(template: str, page: dict) -> str:
    """Render one of ``autograder/render/templates`` with the shared inline style sheet."""
    return _env().get_template(template).render(page=page, css=Markup(_css()))


def autograded_ids(nb: NotebookNode) -> list[str]:
    """The grade_ids of the notebook's autograded test cells, in order."""
    ids = (nbgrader_meta(c).get("grade_id") for c in nb.cells if is_test_cell(c))
    return [gid for gid in ids if gid]


def check_assignment(course: Path, assignment: str) -> None:
    """Raise UsageError unless ``assignment`` is one of the course's assignments."""
    if not any((Path(course) / step / assignment).is_dir() for step in ("source", "release")):
        known = sorted(
            p.name for step in ("source", "release") for p in (Path(course) / step).glob("*/")
        )
        raise UsageError(
            f"unknown assignment {assignment!r} (known: {', '.join(sorted(set(known))) or 'none'})"
        )


def release_notebooks(course: Path, assignment: str) -> dict[str, NotebookNode]:
    """Read the assignment's release notebooks, by name (without ``.ipynb``).

    When ``release/<assignment>/`` has no notebook (a course that grades without having run
    ``release``), the learner's view is made in memory from ``source/`` with nbgrader's own
    ``ClearSolutions`` and ``ClearHiddenTests``.
    """
    notebooks = {}
    folder = Path(course) / "release" / assignment
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        nb = read_notebook(path)
        if nb is None:
            raise UsageError(f"release notebook {path} cannot be read")
        notebooks[path.stem] = nb
    if notebooks:
        return notebooks
    source = Path(course) / "source" / assignment
    for path in sorted(source.glob("*.ipynb")) if source.is_dir() else []:
        nb = read_notebook(path)
        if nb is None:
            raise UsageError(f"source notebook {path} cannot be read")
        notebooks[path.stem] = _learner_view(nb, course)
    if not notebooks:
        raise UsageError(f"assignment {assignment!r} has no notebook in {folder} or {source}")
    return notebooks


def load_results(
    course: Path, assignment: str, *, student: str | None = None
) -> dict[str, SubmissionResult]:
    """The grades of ``assignment`` (or only ``student``'s), by student id: what ``grade``
    recorded in ``reports/<assignment>/results/*.json``, every score read from the
    gradebook (:func:`~autograder.grading.gradebook_grades.final_results`)."""
    folder = Path(course) / "reports" / assignment / "results"
    if student is not None:
        path = folder / f"{student}.json"
        if Path(student).name != student or not path.is_file():
            known = ", ".join(sorted(p.stem for p in folder.glob("*.json"))) or "none"
            raise UsageError(
                f"no result for student {student!r} in assignment {assignment!r} (graded: {known})"
            )
        paths = [path]
    else:
        paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    results = {}
    for path in paths:
        try:
            result = SubmissionResult.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read result file {path}: {exc}") from exc
        results[result.student] = result
    if not results:
        raise UsageError(
            f"no results for assignment {assignment!r} in {folder} "
            "(run `specdec-course grade` first)"
        )
    return final_results(Path(course), assignment, results)


def _learner_view(nb: NotebookNode, course: Path) -> NotebookNode:
    """What ``generate_assignment`` would release: no solutions, no hidden tests."""
    config = load_config(Path(course))
    for step in (ClearSolutions(config=config), ClearHiddenTests(config=config)):
        nb, _ = step.preprocess(nb, {})
    return nb


def read_notebook(path: Path) -> NotebookNode | None:
    """Read a notebook, or return None when it is missing or not a valid notebook.

    It is not validated against nbformat's schema: ``nbformat.read`` only logs what the
    validation finds, and a page is drawn from whatever cells there are.
    """
    try:
        nb = nbformat.convert(nbformat.reader.reads(path.read_text("utf-8")), 4)
    except Exception:  # missing, not JSON, not a notebook: the page says so
        return None
    return nb if isinstance(nb.get("cells"), list) else None


def number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def points(value: Any) -> str:
    """Points as people write them: 2, 0.5, 1.25."""
    return f"{round(number(value), 2):g}"


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n\u2026 ({len(text) - limit} more characters not shown)"


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("autograder.render", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@functools.cache
def _css() -> str:
    """The page style: the shared sheet plus pygments' colours for code."""
    shared = (Path(__file__).parent / "templates" / "style.css").read_text(encoding="utf-8")
    return shared + HtmlFormatter(style="default").get_style_defs(".highlight")
