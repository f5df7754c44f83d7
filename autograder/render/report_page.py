"""Build the instructor's report for one assignment: ``reports/<assignment>/report.html``.

The report reads the per-student results that ``grade`` wrote
(``reports/<assignment>/results/<student>.json``) and shows, on one self-contained page:

* a summary (students, mean and median score, how many per status);
* the distribution of total scores (histogram);
* the pass rate of every test cell (bar chart and table);
* the most frequent failure messages, grouped, with the cells they come from;
* the submissions that failed, timed out, were invalid or were flagged, with reasons;
* the cells that wait for grading by hand, with the students whose.

Every score is the gradebook's (:func:`~autograder.render.page.load_results`): a grader's
manual score wins, as in nbgrader.

Figures are drawn with matplotlib's Agg canvas and embedded as base64 PNG data URIs;
everything that comes from a submission is escaped by the template.
"""

from __future__ import annotations

import base64
import io
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from autograder.course import UsageError
from autograder.files import write_atomic
from autograder.grading.results import CellStatus, Status, Stop, SubmissionResult
from autograder.render.gradesheets import review
from autograder.render.page import (
    SUBMISSION_STATUS,
    autograded_ids,
    check_assignment,
    clip,
    load_results,
    points,
    release_notebooks,
    render_page,
)
from autograder.render.variant_numbers import numbered_tests, release_variants

#: How many groups of failure messages the report lists.
TOP_MESSAGES = 15

_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_BAR = "#0550ae"


def write_report(course: Path, assignment: str) -> Path:
    """Write ``reports/<assignment>/report.html`` from the recorded results; its path."""
    check_assignment(course, assignment)
    results = load_results(course, assignment)
    out = course / "reports" / assignment / "report.html"
    releases = list(release_notebooks(course, assignment).values())
    variants = release_variants(assignment, releases)
    keyed = variants is not None and bool(variants.key)
    html = render_report(
        assignment,
        results,
        cell_order=_release_order(course, assignment),
        feedback_links=_feedback_links(course, assignment, results, out.parent),
        variant_of={s: variants.of(s) for s in results} if keyed else None,
        variant_cells=numbered_tests(variants, releases) if keyed else None,
    )
    write_atomic(out, html)
    return out


def render_report(
    assignment: str,
    results: dict[str, SubmissionResult],
    *,
    cell_order: list[str] | None = None,
    feedback_links: dict[str, str] | None = None,
    variant_of: dict[str, int] | None = None,
    variant_cells: list[str] | None = None,
) -> str:
    """Return the report page for ``results`` (student id -> result).

    ``cell_order`` lists test grade_ids in notebook order (default: order of first appearance);
    ``feedback_links`` maps a student to the relative URL of their feedback page;
    ``variant_of`` maps a student to the variant of their numbers, and ``variant_cells``
    are the tests that grade those numbers: the report then groups the class by variant.
    """
    students = [replace(results[s], student=s) for s in sorted(results)]
    links = feedback_links or {}
    max_score = max((r.max_score for r in students), default=0.0)
    scores = [r.score for r in students]
    cells = _cell_stats(students, cell_order or [])

    counts = Counter(r.status for r in students)
    flagged = [r for r in students if _flags(r)]
    summary = {
        "students": len(students),
        "mean": points(statistics.fmean(scores)) if scores else "–",
        "median": points(statistics.median(scores)) if scores else "–",
        "max_score": points(max_score),
        "statuses": [(SUBMISSION_STATUS[s], counts.get(s, 0)) for s in Status],
        "flagged": len(flagged),
        "reviewed": sum(r.reviewed for r in students),
        "waiting": sum(bool(r.waiting) for r in students),
    }
    problems = [
        Problem.of(r, links.get(r.student))
        for r in students
        if r.status is not Status.GRADED or _flags(r)
    ]
    page = {
        "title": f"Report: {assignment}",
        "wide": True,
        "assignment": assignment,
        "summary": summary,
        "histogram": _png(_histogram(scores, max_score)),
        "pass_chart": _png(_pass_rates(cells)) if cells else None,
        "cells": cells,
        "messages": _message_groups(students),
        "problems": problems,
        "rows": [Problem.of(r, links.get(r.student)) for r in students],
        "waiting": _waiting(students, links, cell_order or []),
        "variant_cells": variant_cells or [],
        "by_variant": _by_variant(students, variant_of, variant_cells or [])
        if variant_of is not None
        else [],
    }
    return render_page("report.html.j2", page)


@dataclass
class VariantRow:
    """How the students of one variant did: their mean score and, for each test of the
    numbers, its pass rate."""

    variant: int
    students: int
    mean: str
    rates: list[CellStats]


def _by_variant(
    students: list[SubmissionResult], variant_of: dict[str, int], cells: list[str]
) -> list[VariantRow]:
    groups: dict[int, list[SubmissionResult]] = {}
    for r in students:
        if r.student in variant_of:
            groups.setdefault(variant_of[r.student], []).append(r)
    rows = []
    for variant, group in sorted(groups.items()):
        stats = {c.grade_id: c for c in _cell_stats(group, cells)}
        rows.append(
            VariantRow(
                variant,
                len(group),
                points(statistics.fmean(r.score for r in group)),
                [stats.get(gid, CellStats(gid)) for gid in cells],
            )
        )
    return rows


# ----------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------


@dataclass
class CellStats:
    """How one test cell went across the class."""

    grade_id: str
    max_score: float = 0.0
    ran: int = 0
    passed: int = 0
    by_status: Counter = field(default_factory=Counter)
    points: float = 0.0

    @property
    def rate(self) -> float:
        return self.passed / self.ran if self.ran else 0.0

    @property
    def rate_text(self) -> str:
        return f"{100 * self.rate:.0f}%" if self.ran else "–"

    @property
    def max_text(self) -> str:
        return points(self.max_score)

    @property
    def mean_text(self) -> str:
        return points(self.points / self.ran) if self.ran else "–"


@dataclass
class Problem:
    """A submission's row: its status, score, reason and flags."""

    student: str
    status: str
    label: str
    score: str
    max_score: str
    reason: str
    flags: list[str]
    seconds: str
    link: str | None
    review: str = ""  #: ``waiting: <cells>``, ``scored by hand``, or empty

    @classmethod
    def of(cls, result: SubmissionResult, link: str | None) -> Problem:
        return cls(
            student=result.student,
            status=result.status.value,
            label=SUBMISSION_STATUS[result.status],
            score=points(result.score),
            max_score=points(result.max_score),
            reason=clip(result.reason, 1000),
            flags=_flags(result),
            seconds=f"{result.seconds:.1f}",
            link=link,
            review=review(result).replace("reviewed", "scored by hand"),
        )


def _flags(result: SubmissionResult) -> list[str]:
    """The submission's flags, then each cell's, prefixed with the cell's grade_id."""
    flags = list(result.flags)
    for cell in result.cells:
        flags += [f"{cell.grade_id}: {f}" for f in cell.flags]
    return list(dict.fromkeys(flags))  # each once, in order


@dataclass
class Waiting:
    """One cell that waits for a grader, and the students whose."""

    grade_id: str
    points: str
    students: list[Problem]


def _waiting(
    students: list[SubmissionResult], links: dict[str, str], order: list[str]
) -> list[Waiting]:
    """The cells that wait for grading by hand: autograded ones in notebook order, then
    the others by name."""
    found: dict[str, Waiting] = {}
    for result in students:
        for cell in result.waiting:
            entry = found.setdefault(
                cell.grade_id, Waiting(cell.grade_id, points(cell.max_score), [])
            )
            entry.students.append(Problem.of(result, links.get(result.student)))
    rank = {gid: i for i, gid in enumerate(order)}
    return sorted(found.values(), key=lambda w: (rank.get(w.grade_id, len(rank)), w.grade_id))


def _cell_stats(students: list[SubmissionResult], order: list[str]) -> list[CellStats]:
    """How each autograded test cell went (a cell graded only by hand is not one)."""
    stats: dict[str, CellStats] = {gid: CellStats(gid) for gid in order}
    for result in students:
        for cell in result.cells:
            if cell.status is CellStatus.BY_HAND:
                continue
            s = stats.setdefault(cell.grade_id, CellStats(cell.grade_id))
            s.max_score = max(s.max_score, cell.max_score)
            if cell.stop is Stop.NOT_GRADED:
                s.by_status["not-run"] += 1  # the notebook never ran: not a failure of this cell
                continue
            s.ran += 1
            s.passed += cell.status is CellStatus.PASSED
            s.by_status[cell.status.value] += 1
            s.points += cell.score
    return list(stats.values())


def _message_groups(students: list[SubmissionResult]) -> list[dict]:
    """Group failure messages that differ only in numbers; most widespread first."""
    groups: dict[str, dict] = {}
    for result in students:
        for cell in result.cells:
            message = cell.message.strip()
            if cell.status is CellStatus.PASSED or not message or cell.stop is Stop.NOT_GRADED:
                continue
            key = _NUMBER.sub("#", " ".join(message.split()))[:500]
            group = groups.setdefault(
                key, {"count": 0, "texts": Counter(), "cells": Counter(), "students": set()}
            )
            group["count"] += 1
            group["texts"][message] += 1
            group["cells"][cell.grade_id] += 1
            group["students"].add(result.student)
    # Most students first: a mistake many learners share matters more than one notebook
    # that fails every cell.
    ranked = sorted(
        groups.values(),
        key=lambda g: (-len(g["students"]), -g["count"], g["texts"].most_common(1)[0][0]),
    )
    return [
        {
            "example": clip(g["texts"].most_common(1)[0][0], 1500),
            "variants": len(g["texts"]),
            "count": g["count"],
            "students": len(g["students"]),
            "cells": sorted(g["cells"].items(), key=lambda kv: (-kv[1], kv[0])),
        }
        for g in ranked[:TOP_MESSAGES]
    ]


def _release_order(course: Path, assignment: str) -> list[str]:
    """Graded grade_ids in release-notebook order (empty when there is no release)."""
    try:
        notebooks = release_notebooks(course, assignment)
    except UsageError:
        return []
    return [gid for nb in notebooks.values() for gid in autograded_ids(nb)]


def _feedback_links(
    course: Path, assignment: str, results: dict[str, SubmissionResult], start: Path
) -> dict[str, str]:
    """Relative links from the report to each student's (first) feedback page, if written."""
    links = {}
    for student in results:
        pages = sorted((course / "feedback" / student / assignment).glob("*.html"))
        if pages:
            links[student] = Path(os.path.relpath(pages[0], start)).as_posix()
    return links


# ----------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------


def _histogram(scores: list[float], max_score: float) -> Figure:
    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    # One bar per point when the scale is short, twenty bins otherwise.
    top = max(max_score, max(scores, default=0.0), 1.0)
    if top <= 30:
        edges = [x - 0.5 for x in range(int(top) + 2)]
    else:
        edges = [top * i / 20 for i in range(21)]
    ax.hist(scores, bins=edges, color=_BAR, edgecolor="white")
    if scores:
        mean, median = statistics.fmean(scores), statistics.median(scores)
        ax.axvline(mean, color="#b3261e", linestyle="--", label=f"mean {points(mean)}")
        ax.axvline(median, color="#1f2328", linestyle=":", label=f"median {points(median)}")
        ax.legend(frameon=False, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=2)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(f"total score (points, out of {points(max_score)})")
    ax.set_ylabel("students")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _pass_rates(cells: list[CellStats]) -> Figure:
    fig = Figure(figsize=(8, 1.0 + 0.32 * len(cells)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    labels = [c.grade_id for c in cells]
    rates = [c.rate for c in cells]
    ys = range(len(cells))
    ax.barh(ys, rates, color=_BAR, height=0.7)
    # The count next to each bar: the chart reads without colour or the table.
    for y, c in zip(ys, cells, strict=True):
        ax.text(min(c.rate, 1.0) + 0.01, y, f"{c.passed}/{c.ran}", va="center", fontsize=8)
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("share of the submissions that ran the cell and passed it")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _png(fig: Figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (Agg canvas, no pyplot state)."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
