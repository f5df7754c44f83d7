"""``autograder.preprocessors.CheckCellMetadata`` decides exactly as nbgrader's own.

Every lesson notebook and sample submission, and corrupted copies of one (each breaks the
nbgrader metadata in a way nbgrader rejects), go through both validators: the same
notebooks pass, and a rejected one gets the same exception with the same message.
"""

from __future__ import annotations

import copy

import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator
from support.course import REPO

from autograder.preprocessors.check_cell_metadata import FastMetadataValidator

NOTEBOOKS = sorted(
    [*REPO.glob("source/*/*.ipynb"), *REPO.glob("tests/files/*/submissions/*.ipynb")]
)
LESSON = REPO / "source" / "e7_2_acceptance_tests" / "acceptance_tests.ipynb"


def _graded(nb):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))


def _set(key, value):
    def corrupt(nb):
        _graded(nb).metadata.nbgrader[key] = value

    return corrupt


def _delete(key):
    def corrupt(nb):
        del _graded(nb).metadata.nbgrader[key]

    return corrupt


def _markdown_grade_without_solution(nb):
    cell = _graded(nb)
    cell.cell_type = "markdown"
    cell.metadata.nbgrader["solution"] = False
    cell.pop("outputs", None)
    cell.pop("execution_count", None)


CORRUPTIONS = {
    "points not a number": _set("points", "many"),
    "grade not a boolean": _set("grade", "yes"),
    "no grade_id": _delete("grade_id"),
    "schema too old": _set("schema_version", 1),
    "schema too new": _set("schema_version", 99),
    "negative points": _set("points", -1),
    "markdown grade cell that is no solution": _markdown_grade_without_solution,
}


def outcome(validator_cls, nb) -> tuple[str, str] | None:
    try:
        validator_cls().validate_nb(copy.deepcopy(nb))
    except Exception as exc:  # compared, not judged
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_every_notebook_gets_nbgraders_verdict(path):
    nb = nbformat.read(path, as_version=4)
    assert outcome(FastMetadataValidator, nb) == outcome(MetadataValidator, nb)


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupted_metadata_gets_nbgraders_error(name):
    nb = nbformat.read(LESSON, as_version=4)
    CORRUPTIONS[name](nb)
    theirs = outcome(MetadataValidator, nb)
    assert theirs is not None, f"nbgrader accepts {name}: not a corruption"
    assert outcome(FastMetadataValidator, nb) == theirs
