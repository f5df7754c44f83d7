"""Build one HTML feedback page per student, without the source of any hidden test.

nbgrader's ``generate_feedback`` renders the autograded notebook, whose test cells hold the
instructor's full source (hidden tests included) and whose outputs hold tracebacks that quote
it.  This module builds the page from three inputs instead:

* the student's grades (:func:`~autograder.render.page.load_results`): every score from
  nbgrader's gradebook, so a grader's review shows (a cell scored by hand is marked, a
  written answer waiting for a grader says so, the grader's comment on a cell is shown
  with the learner's answer, where nbgrader's own feedback shows it), with the statuses
  and failure messages ``grade`` recorded;
* the learner's submitted notebook: their own cells (solutions and cells they added);
* the release notebook: every other cell, test cells included, exactly as learners got them.

So a test cell can only ever show what the learner already had.  Pages are self-contained
(inline CSS, no scripts) and escape everything that comes from a submission.

Pages go where nbgrader puts them: ``feedback/<student>/<assignment>/<notebook>.html``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import mistune
from markupsafe import Markup
from nbformat import NotebookNode
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from autograder.cells import nbgrader_meta
from autograder.files import write_atomic
from autograder.grading.results import CellResult, Stop, SubmissionResult
from autograder.render.page import (
    MAX_MESSAGE_CHARS,
    MAX_SOURCE_CHARS,
    SUBMISSION_STATUS,
    autograded_ids,
    check_assignment,
    clip,
    load_results,
    number,
    points,
    read_notebook,
    release_notebooks,
    render_page,
)
from autograder.render.variant_numbers import release_variants

CELL_STATUS = MappingProxyType(
    {
        "passed": ("Passed", "\u2713"),
        "failed": ("Failed", "\u2717"),
        "timeout": ("Timed out", "\u23f1"),
        "missing": ("Missing", "?"),
        "not-run": ("Not run", "\u2013"),
        "by-hand": ("Graded by hand", "\u270e"),
    }
)
#: The badge of a cell a grader scored, and of one that waits for a grader.
REVIEWED = ("reviewed", "Scored by hand", "\u270e")
WAITING = ("waiting", "Waiting for grading", "\u2026")


_HIDDEN_BLOCK = re.compile(
    r"^[ \t]*#+[ \t]*BEGIN HIDDEN TESTS.*?^[ \t]*#+[ \t]*END HIDDEN TESTS[^\n]*\n?",
    re.DOTALL | re.MULTILINE,
)


_SOLUTION_BLOCK = re.compile(
    r"^[ \t]*#+[ \t]*BEGIN SOLUTION.*?^[ \t]*#+[ \t]*END SOLUTION[^\n]*\n?",
    re.DOTALL | re.MULTILINE,
)


def page_path(course: Path, assignment: str, student: str, notebook: str) -> Path:
    """Where ``student``'s feedback page for ``notebook`` is written (nbgrader's layout)."""
    return course / "feedback" / student / assignment / f"{notebook}.html"


def write_pages(
    course: Path,
    assignment: str,
    *,
    student: str | None = None,
    releases: dict[str, NotebookNode] | None = None,
) -> list[Path]:
    """Write ``feedback/<student>/<assignment>/<notebook>.html`` for each recorded result
    (or only ``student``'s) in the course root ``course``; return the paths, by student.

    ``releases`` are the assignment's :func:`release_notebooks`, when the caller has read
    them already (``grade`` reads them once for the pages of its run).  A UsageError says
    what is missing (an unknown assignment, no results yet).
    """
    check_assignment(course, assignment)
    results = load_results(course, assignment, student=student)
    if releases is None:
        releases = release_notebooks(course, assignment)

    pages = []
    for sid, result in sorted(results.items()):
        for name, release_nb in releases.items():
            submitted = read_notebook(course / "submitted" / sid / assignment / f"{name}.ipynb")
            html = render_feedback(
                result,
                submitted_nb=submitted,
                release_nb=release_nb,
                notebook=name,
                others=[n for n in releases.values() if n is not release_nb],
            )
            page = page_path(course, assignment, sid, name)
            page.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(page, html)
            pages.append(page)
    return pages


def render_feedback(
    result: SubmissionResult,
    *,
    submitted_nb: NotebookNode | None,
    release_nb: NotebookNode,
    notebook: str | None = None,
    others: Iterable[NotebookNode] = (),
) -> str:
    """Return the HTML feedback page for one student's notebook.

    Parameters
    ----------
    result : the student's recorded result (``results/<student>.json``).
    submitted_nb : the notebook the learner submitted, or None when it is missing or unreadable.
    release_nb : the notebook as released to learners; the only source of test code shown.
    notebook : the notebook's name, for the title (default: the assignment name).
    others : the assignment's other release notebooks, whose graded cells this page leaves out.

    Notes
    -----
    The page walks the release notebook in order.  Solution cells show the learner's version;
    every other cell, test cells included, shows the release version.  Cells the learner
    added are shown after the cell they followed.  Any hidden-test block that still reaches
    a displayed source (a release built by hand, say) is cut out before rendering.
    """
    cells_by_id = {c.grade_id: c for c in result.cells if c.grade_id}
    elsewhere = {gid for nb in others for gid in autograded_ids(nb)}

    # The score table: every graded cell of this notebook, in notebook order, then any result
    # that belongs to no release cell (the grader knows a cell the release lacks).
    # A graded answer cell (graded by hand) is listed when the gradebook has its grade.
    tests: list[TestRow] = []
    for cell in release_nb.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if meta.get("grade") and gid and (gid in cells_by_id or not meta.get("solution")):
            tests.append(_test_row(gid, cells_by_id.get(gid), meta.get("points", 0)))
    listed = {t.grade_id for t in tests}
    for gid, cell in cells_by_id.items():
        if gid not in listed and gid not in elsewhere:
            tests.append(_test_row(gid, cell, cell.max_score))

    status = result.status.value
    waiting = [t for t in tests if t.status == WAITING[0]]
    notice = ""
    if submitted_nb is None:
        notice = (
            "Your notebook could not be read, so only your scores are shown. "
            "Check that you submitted the assignment's .ipynb file and that it opens in Jupyter."
        )
    page = {
        "title": f"Feedback: {notebook or result.assignment}",
        "student": result.student,
        "assignment": result.assignment,
        "notebook": notebook,
        "score": points(result.score),
        "max_score": points(result.max_score),
        "late_penalty": points(result.late_penalty) if result.late_penalty > 0 else "",
        "waiting": points(sum(t.max_score for t in waiting)) if waiting else "",
        "status": status,
        "status_label": SUBMISSION_STATUS[result.status],
        "reason": clip(result.reason, MAX_MESSAGE_CHARS),
        "notice": notice,
        "tests": tests,
        "messages": any(t.message and t.status != "passed" for t in tests),
        "page_score": points(sum(t.score for t in tests)),
        "page_max": points(sum(t.max_score for t in tests)),
        "multi": bool(elsewhere),
        "blocks": _blocks(
            release_nb,
            submitted_nb,
            {t.grade_id: t for t in tests},
            result.comments,
            _own_numbers(result, release_nb),
        )
        if submitted_nb is not None
        else [],
    }
    return render_page("feedback.html.j2", page)


@dataclass
class TestRow:
    """One graded cell's line in the score table."""

    grade_id: str
    anchor: str
    score: float
    max_score: float
    status: str
    label: str
    symbol: str
    message: str
    score_text: str = ""
    max_text: str = ""
    autograder: str = ""  #: the autograder's verdict, on a cell a grader scored since

    def __post_init__(self) -> None:
        self.score_text, self.max_text = points(self.score), points(self.max_score)


@dataclass
class Block:
    """One cell of the walk through the notebook."""

    kind: str  # markdown | provided | answer | added | removed | test
    html: Markup = field(default_factory=Markup)
    label: str = ""
    test: TestRow | None = None
    comment: str = ""  #: the grader's comment on the cell (answers only, as in nbgrader)
    numbers: str = ""  #: the learner's own numbers for the answer's questions, if any


def _test_row(grade_id: str, cell: CellResult | None, points: Any) -> TestRow:
    # A cell the grader did not report, or one of a notebook that was not executed at all
    # ("not graded: <reason>" on every cell says nothing the page's banner does not).
    if cell is None or cell.stop is Stop.NOT_GRADED:
        max_score = number(points) if cell is None else cell.max_score
        status, score, message = "not-run", 0.0, ""
    else:
        status, score, max_score = cell.status.value, cell.score, cell.max_score
        message = clip(cell.message, MAX_MESSAGE_CHARS)
    label, symbol = CELL_STATUS.get(status, (status.capitalize(), "\u2022"))
    if status == "passed" and 0 < score < max_score:
        label, symbol = "Partial credit", "\u25d0"
    verdict = ""
    if cell is not None and (cell.waiting or cell.manual):
        if status != "by-hand":
            verdict = label
        status, label, symbol = WAITING if cell.waiting else REVIEWED
    row = TestRow(grade_id, _anchor(grade_id), score, max_score, status, label, symbol, message)
    row.autograder = verdict
    return row


def _own_numbers(result: SubmissionResult, release_nb: NotebookNode) -> dict[str, str]:
    """The student's numbers for each answer whose questions have their own, as the hidden
    tests used them (``{solution grade_id: text}``)."""
    variants = release_variants(result.assignment, [release_nb])
    if variants is None:
        return {}
    by_answer = {}
    for cell in release_nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        lines = variants.numbers(result.student, gid) if gid else []
        if lines:
            by_answer[gid] = "\n".join(lines)
    return by_answer


def _blocks(
    release_nb: NotebookNode,
    submitted_nb: NotebookNode,
    tests: dict[str, TestRow],
    comments: dict[str, str],
    numbers: dict[str, str],
) -> list[Block]:
    """Walk the release notebook, merging in the learner's cells and, at each answer, the
    grader's comment on it and the learner's own numbers for its questions."""
    matches, added = _align(release_nb.cells, submitted_nb.cells)
    blocks = [_added_block(cell) for cell in added.get(-1, [])]
    for index, cell in enumerate(release_nb.cells):
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        score = tests.get(gid) if meta.get("grade") else None
        if meta.get("solution"):
            # The learner's answer (with its score when it is graded as an answer).
            mine = matches.get(index)
            said = clip(comments.get(gid, ""), MAX_MESSAGE_CHARS) if gid else ""
            if mine is None:
                blocks.append(Block("removed", label=gid or "answer", test=score, comment=said))
            else:
                html = _learner_source(mine)
                blocks.append(
                    Block("answer", html, gid or "answer", score, said, numbers.get(gid, ""))
                )
        elif score is not None:
            # A test cell: the release source (never the submitted or instructor one).
            blocks.append(Block("test", _code(_strip_hidden(cell.source)), gid, score))
        elif cell.cell_type == "markdown":
            # Only the lesson's headings (its parts and their points): the page is about
            # the learner's work, and the notebook they have holds the rest of the text.
            headings = _headings(cell.source)
            if headings:
                blocks.append(Block("markdown", _markdown(headings)))
        elif cell.cell_type == "code" and cell.source.strip():
            blocks.append(Block("provided", _code(_strip_hidden(cell.source)), "provided code"))
        blocks.extend(_added_block(c) for c in added.get(index, []))
    return blocks


def _align(
    release: list[NotebookNode], submitted: list[NotebookNode]
) -> tuple[dict[int, NotebookNode], dict[int, list[NotebookNode]]]:
    """Match submitted cells to release cells; return matches and the learner's added cells.

    A submitted cell matches a release cell by nbgrader ``grade_id``, else by cell id, else by
    identical source.  Unmatched submitted cells were added by the learner; each is attached to
    the release cell that the nearest matched cell above it belongs to (-1: the top).
    """
    by_grade_id = {}
    by_cell_id = {}
    by_source: dict[str, list[int]] = {}
    for i, cell in enumerate(release):
        gid = nbgrader_meta(cell).get("grade_id")
        if gid:
            by_grade_id.setdefault(gid, i)
        if cell.get("id"):
            by_cell_id.setdefault(cell["id"], i)
        by_source.setdefault(cell.source, []).append(i)

    matches: dict[int, NotebookNode] = {}
    added: dict[int, list[NotebookNode]] = {}
    last = -1
    for cell in submitted:
        gid = nbgrader_meta(cell).get("grade_id")
        candidates = [by_grade_id.get(gid)] if gid else []
        candidates.append(by_cell_id.get(cell.get("id")))
        candidates.extend(by_source.get(cell.get("source", ""), []))
        index = next((i for i in candidates if i is not None and i not in matches), None)
        # A graded cell keeps its grade_id: a learner's cell that only copies its source or id
        # is the learner's own, not the test.
        if index is not None and not gid and nbgrader_meta(release[index]).get("grade_id"):
            index = None
        if index is None:
            added.setdefault(last, []).append(cell)
        else:
            matches[index] = cell
            last = index
    return matches, added


def _added_block(cell: NotebookNode) -> Block:
    return Block("added", _learner_source(cell), "a cell you added")


def _learner_source(cell: NotebookNode) -> Markup:
    """A learner's cell, escaped: code highlighted, text as preformatted text."""
    source = _strip_hidden(str(cell.get("source", "")))
    if cell.get("cell_type") == "code":
        return _code(source)
    return Markup('<pre class="text">{}</pre>').format(clip(source, MAX_SOURCE_CHARS))


def _strip_hidden(source: str) -> str:
    """Cut hidden-test and solution blocks, should a displayed source still hold one."""
    source = _HIDDEN_BLOCK.sub("# (hidden tests are not shown)\n", source)
    return _SOLUTION_BLOCK.sub("# (solution not shown)\n", source)


def _code(source: str) -> Markup:
    """Highlighted Python; pygments escapes every token."""
    return Markup('<pre class="highlight"><code>{}</code></pre>').format(
        _highlighted(clip(source, MAX_SOURCE_CHARS))
    )


@functools.lru_cache(maxsize=512)
def _highlighted(source: str) -> Markup:
    """Highlighting is most of a page's cost; release cells repeat on every student's page."""
    return Markup(highlight(source, _LEXER, _FORMATTER))


_LEXER = PythonLexer()


_FORMATTER = HtmlFormatter(nowrap=True)


class _SafeRenderer(mistune.HTMLRenderer):
    """Markdown without raw HTML or remote images, its headings below the page's own."""

    def heading(self, text: str, level: int, **attrs: Any) -> str:
        return super().heading(text, min(level + 2, 6), **attrs)

    def image(self, text: str, url: str, title: str | None = None) -> str:
        return f'<span class="image-alt">[image: {text}]</span>'


def _render_math(renderer: Any, text: str) -> str:
    return '<code class="math">' + renderer.escape_attribute(text) + "</code>"


def _headings(source: str) -> str:
    """The ATX headings (``## Part 1 ...``) of a Markdown text, outside code fences."""
    lines, fence = [], None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None and re.match(r"#{1,6}\s+\S", stripped):
            lines.append(stripped)
    return "\n\n".join(lines)


@functools.cache
def _markdown_parser() -> mistune.Markdown:
    md = mistune.create_markdown(
        escape=True, renderer=_SafeRenderer(escape=True), plugins=["table", "strikethrough", "math"]
    )
    md.renderer.register("block_math", _render_math)
    md.renderer.register("inline_math", _render_math)
    return md


def _markdown(source: str) -> Markup:
    """Instructor Markdown as HTML, raw HTML escaped."""
    return Markup(_markdown_parser()(_strip_hidden(clip(source, MAX_SOURCE_CHARS))))


def _anchor(grade_id: str) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]+", "-", grade_id)
