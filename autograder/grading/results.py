"""What grading one submission produced: typed results, with the one list of statuses.

:class:`SubmissionResult` and :class:`CellResult` are what a worker returns and what the
parent records.  The JSON file ``reports/<assignment>/results/<student>.json`` is their
serialisation (:meth:`SubmissionResult.to_json`), version :data:`SCHEMA`: what only the
grader knows (each test cell's autograded score, status and message, the flags, the
student's :class:`~autograder.intake.records.Identity`, written as top-level fields).  A
file of another schema, or without one, is not read.

The grades that leave the tool are these results with nbgrader's gradebook read over
them (:mod:`autograder.grading.gradebook_grades`): the fields marked :data:`GRADEBOOK`
hold what the gradebook says (a manual score, a cell waiting for review, the
instructor's comments, the late penalty) and are never written to the JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from autograder.intake.records import PERSON, Identity

#: The version of the results file this grader writes and reads.
SCHEMA = 1
#: The ``metadata`` of a field read from nbgrader's gradebook, never written to the JSON.
GRADEBOOK = {"gradebook": True}


class Status(str, Enum):
    """A submission's status; its value is what the CSVs and the JSON hold."""

    GRADED = "graded"  #: every test cell ran (some may have failed)
    FAILED = "failed"  #: the kernel died, a worker crashed, nbgrader could not grade it
    TIMEOUT = "timeout"  #: a cell or the whole notebook ran past its time limit
    INVALID = "invalid"  #: not a readable notebook
    MISSING = "missing"  #: on the roster, but nothing was submitted

    def __str__(self) -> str:
        return self.value


class CellStatus(str, Enum):
    """A test cell's status."""

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    MISSING = "missing"  #: the test cell is not in the submitted notebook
    #: a cell only a person grades (a written answer): its score is the gradebook's
    BY_HAND = "by-hand"

    def __str__(self) -> str:
        return self.value


class Stop(str, Enum):
    """Why a test cell scored zero without its own code failing (empty: it ran)."""

    NONE = ""
    NOT_RUN = "not-run"  #: execution stopped before it (the kernel was gone or stopped)
    NOTEBOOK_TIMEOUT = "notebook-timeout"  #: the notebook's deadline passed before it
    KERNEL_DIED = "kernel-died"  #: the kernel died while it ran
    NOT_GRADED = "not-graded"  #: the notebook was not executed at all

    def __str__(self) -> str:
        return self.value


#: Wording of the messages of cells that did not run (shown on pages and in the CSVs).
NOT_RUN_PREFIX = "not run: "
NOT_GRADED_PREFIX = "not graded: "


@dataclass(slots=True)
class CellResult:
    """One graded cell of one submission (slotted: a class's results hold many).

    As the grader records it, an autograded test cell with its autograded ``score``.  Read
    over the gradebook, ``score`` is nbgrader's (a manual score wins), and a cell graded
    only by hand has status ``by-hand``.
    """

    grade_id: str
    score: float
    max_score: float
    status: CellStatus
    message: str = ""
    flags: list[str] = field(default_factory=list)
    stop: Stop = Stop.NONE
    #: A grader gave the cell its score by hand (``Grade.manual_score``).
    manual: bool = field(default=False, metadata=GRADEBOOK)
    #: The cell waits for a grader (``Grade.needs_manual_grade``).
    waiting: bool = field(default=False, metadata=GRADEBOOK)

    @classmethod
    def not_graded(cls, grade_id: str, max_score: float, reason: str) -> CellResult:
        """A cell of a notebook that was not executed: zero, with the reason."""
        return cls(
            grade_id,
            0.0,
            float(max_score),
            CellStatus.FAILED,
            NOT_GRADED_PREFIX + reason,
            stop=Stop.NOT_GRADED,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        return cls(
            grade_id=sys.intern(str(data["grade_id"])),  # one copy for the whole class
            score=float(data.get("score", 0.0)),
            max_score=float(data.get("max_score", 0.0)),
            status=CellStatus(data.get("status", CellStatus.FAILED)),
            message=str(data.get("message") or ""),
            flags=[str(f) for f in data.get("flags", [])],
            stop=Stop(data.get("stop", Stop.NONE)),
        )


@dataclass
class SubmissionResult:
    """One submission's grade: its status, score, flags and every test cell."""

    student: str
    assignment: str
    status: Status = Status.FAILED
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    flags: list[str] = field(default_factory=list)
    cells: list[CellResult] = field(default_factory=list)
    seconds: float = 0.0
    #: What the result was graded from (submission, source, limits); resume compares it.
    key: str = ""
    #: Who the student is, when they submitted (UTC) and whether late, as the download
    #: and roster say (lateness, else as nbgrader's due date says).
    identity: Identity = Identity()
    #: Whether the course gradebook has these scores (false: an earlier run could not
    #: write them there; the next run does, without regrading).
    in_gradebook: bool = False
    #: The notebook differs from the one the student's earlier result was graded from
    #: (or no earlier result says): a manual score in the gradebook is then for other work,
    #: and waits for review again.  Cleared once the result is in the gradebook.
    new_work: bool = False
    #: How the sandboxed kernel started: ``forked`` from the worker's warm parent, or
    #: ``fresh`` (``fresh: <why not forked>``); empty without the sandbox, or when not
    #: recorded.  How a kernel started is not part of the grade (not compared).
    kernel: str = field(default="", compare=False)
    #: The executed notebook (nbformat JSON), carried from the worker; not serialised.
    autograded: str | None = field(default=None, repr=False, compare=False)
    #: nbgrader's late penalty for the submission: ``score`` is the cells' sum less it.
    late_penalty: float = field(default=0.0, metadata=GRADEBOOK)
    #: The comments on the submission's cells (the instructor's, else the grader's), by
    #: the cell's grade_id.
    comments: dict[str, str] = field(default_factory=dict, metadata=GRADEBOOK)
    #: The cells whose manual score this run's new work sent back for review.
    review: list[str] = field(default_factory=list, metadata=GRADEBOOK, compare=False)

    @property
    def reviewed(self) -> bool:
        """A grader scored at least one cell by hand."""
        return any(c.manual for c in self.cells)

    @property
    def waiting(self) -> list[CellResult]:
        """The cells that wait for a grader."""
        return [c for c in self.cells if c.waiting]

    def total(self) -> None:
        """Set ``score`` and ``max_score`` from the cells, and list each flag once."""
        self.score = float(sum(c.score for c in self.cells))
        self.max_score = float(sum(c.max_score for c in self.cells))
        self.flags = list(dict.fromkeys(self.flags))

    def to_dict(self) -> dict[str, Any]:
        """The results file's fields: the schema first, the identity's at the top level."""
        data: dict[str, Any] = {"schema": SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "identity":  # written only when the download or roster told them
                data.update((k, v) for k, v in _plain(value).items() if v is not None)
                if value.timestamp is not None:  # ISO 8601
                    data["timestamp"] = value.timestamp.isoformat()
            elif f.name == "cells":
                data["cells"] = [_plain(cell) for cell in value]
            elif f.name != "autograded" and not f.metadata.get("gradebook"):
                data[f.name] = _plain(value)
        if not data["kernel"]:  # written only for a sandboxed kernel
            del data["kernel"]
        if not data["new_work"]:  # written only while it matters
            del data["new_work"]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SubmissionResult:
        """Read a results file's fields; a ValueError for another schema than this one's."""
        if not isinstance(data, dict):
            raise ValueError("a results file holds one JSON object")
        schema = data.get("schema")
        if type(schema) is not int or schema != SCHEMA:
            raise ValueError(f"results file of schema {schema!r} (this grader reads {SCHEMA})")
        return cls(
            student=str(data["student"]),
            assignment=str(data.get("assignment", "")),
            status=Status(data.get("status", Status.FAILED)),
            reason=str(data.get("reason") or ""),
            score=float(data.get("score", 0.0)),
            max_score=float(data.get("max_score", 0.0)),
            flags=[str(f) for f in data.get("flags", [])],
            cells=[CellResult.from_dict(c) for c in data.get("cells", [])],
            seconds=float(data.get("seconds", 0.0)),
            key=str(data.get("key") or ""),
            identity=Identity(
                **{name: _text(data.get(name)) for name in PERSON},
                timestamp=_when(data.get("timestamp")),
                late=None if data.get("late") is None else bool(data["late"]),
            ),
            in_gradebook=bool(data.get("in_gradebook", False)),
            new_work=bool(data.get("new_work", False)),
            kernel=str(data.get("kernel") or ""),
        )

    @classmethod
    def from_json(cls, text: str) -> SubmissionResult:
        return cls.from_dict(json.loads(text))


@dataclass
class GradeResult:
    """What one ``grade`` run did."""

    assignment: str
    course: Path
    #: every student graded so far (this run and earlier ones)
    results: dict[str, SubmissionResult] = field(default_factory=dict)
    graded_now: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)  #: unchanged since an earlier run
    layout: str = "plain"  #: the submissions' layout (``canvas``, ``nbgrader``, ...)
    in_place: bool = False  #: graded from the course's own ``submitted/``
    ignored: list[str] = field(default_factory=list)  #: files not graded, with why
    warnings: list[str] = field(default_factory=list)
    workers: int = 0  #: worker processes the run graded with (a cluster's: when it started)
    engine: str = "local pool"  #: where the jobs ran: the local pool, a LocalCluster, a scheduler
    #: processes of earlier graders' jobs whose worker was dead, killed when this run started
    swept: int = 0
    #: students whose manual scores this run sent back for review (new work), with the cells
    to_review: dict[str, list[str]] = field(default_factory=dict)

    @property
    def reports(self) -> Path:
        return self.course / "reports" / self.assignment

    @property
    def results_dir(self) -> Path:
        """``reports/<assignment>/results/``: one JSON file per student."""
        return self.reports / "results"


def _plain(value: Any) -> Any:
    """``value`` as its JSON holds it: an enum as its value, a list copied, a dataclass
    (a cell, an identity) as a dict of its fields."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, (CellResult, Identity)):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in fields(value)
            if not f.metadata.get("gradebook")
        }
    return value


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _when(value: Any) -> datetime | None:
    """An ISO 8601 time as the results file holds it (None: not known)."""
    return None if value is None else datetime.fromisoformat(str(value))
