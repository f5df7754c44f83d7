"""Whose numbers a student's notebook was graded against, for the pages.

A lesson with per-learner numbers (``specdec_reference.variants``) carries the course's
variant key in its release, in the locked *Your numbers* cell.  With that key and the
student's id as the intake recorded it, the same derivation the hidden tests ran gives the
student's variant and, for each answer cell, the numbers its questions used: the feedback
page shows them beside the answer, the report groups the class by variant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from nbformat import NotebookNode

from autograder.cells import nbgrader_meta
from specdec_reference.variants import KEY_NAME, SPACES, VariantSpace

_KEY_LINE = re.compile(rf'^{KEY_NAME} = ("(?:[^"\\]|\\.)*")', re.M)


@dataclass(frozen=True)
class Variants:
    """An assignment's variant space and the key its release was generated with."""

    space: VariantSpace
    key: str

    def of(self, student: str) -> int:
        """The student's variant (row of the table)."""
        return self.space.index(self.key, student)

    def numbers(self, student: str, answer: str) -> list[str]:
        """The lines of the student's numbers for the solution cell ``answer`` (none when
        the answer's questions have no numbers of their own)."""
        return self.space.describe(self.space.numbers(self.key, student), answer)


def release_variants(assignment: str, releases: Iterable[NotebookNode]) -> Variants | None:
    """The assignment's variants, or None when it has none (no table, no *Your numbers*
    cell in its release)."""
    space = SPACES.get(assignment)
    if space is None:
        return None
    for nb in releases:
        for cell in nb.cells:
            match = _KEY_LINE.search(cell.get("source", "")) if cell.cell_type == "code" else None
            if match:
                return Variants(space, json.loads(match[1]))
    return None


def numbered_tests(variants: Variants, releases: Iterable[NotebookNode]) -> list[str]:
    """The test cells that grade answers with numbers of their own, in notebook order:
    those that follow such an answer cell, up to the next answer cell."""
    answers = {gid for gid, _ in variants.space.lines}
    tests, current = [], None
    for nb in releases:
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            if meta.get("solution"):
                current = meta.get("grade_id")
            elif meta.get("grade") and current in answers:
                tests.append(meta["grade_id"])
    return tests
