"""``Variants`` and ``GradedVariants``: whose numbers a lesson's locked cells use.

A lesson with per-learner numbers (``specdec_reference.variants``) has locked cells that
assign ``COURSE_VARIANT_KEY = ""`` and, in its hidden tests, ``GRADED_STUDENT_ID = ""``.
``Variants`` runs first in ``generate_assignment`` and writes the course's key
(``c.Variants.key`` in ``nbgrader_config.py``) into those lines, so that the release,
and the gradebook's copy of every locked cell, carry it.  ``GradedVariants`` runs first
in ``autograde``, after nbgrader's ``OverwriteCells`` has put the source's locked cells
back: it writes the student's id, the ``student_id`` the grader configures or else the
student folder nbgrader grades (``submitted/<id>/``).  Learner
code never chooses either value: only locked cells are filled, and the test cells' own
source carries the id into the kernel.
"""

from __future__ import annotations

import json
import re

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

#: An assignment the grader fills in: the name at the start of a line, then ``= ""``.
_SLOT = re.compile(
    r'^(?P<lead>[ \t]*(?P<name>_?(?:COURSE_VARIANT_KEY|GRADED_STUDENT_ID)) = )""', re.M
)


class Variants(NbGraderPreprocessor):
    """Write the course's variant key into the notebook's locked cells."""

    key = Unicode(
        "",
        help="The course's variant key: each learner's numbers are chosen by a hash of it, "
        "the assignment and the learner's id. Empty: every learner gets the lesson's "
        "printed numbers. Change it (and release again) to change every learner's numbers.",
    ).tag(config=True)

    def values(self, resources: ResourcesDict) -> dict[str, str]:
        """What each slot's name is filled with."""
        return {"COURSE_VARIANT_KEY": self.key}

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict
    ) -> tuple[NotebookNode, ResourcesDict]:
        values = self.values(resources)

        def fill(match: re.Match[str]) -> str:
            value = values.get(match["name"].lstrip("_"))
            return match[0] if value is None else match["lead"] + json.dumps(str(value))

        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_locked(cell):
                cell.source = _SLOT.sub(fill, cell.source)
        return nb, resources


class GradedVariants(Variants):
    """At autograde: the id of the student whose notebook is graded.

    The key is not filled again: the locked cells carry the one their release was
    generated with (nbgrader's gradebook keeps that copy), so that a key changed after
    the release cannot grade learners against numbers they never saw.
    """

    student_id = Unicode(
        "",
        help="The student's id as the intake recorded it. Empty: the student folder "
        "nbgrader grades, submitted/<student_id>/.",
    ).tag(config=True)

    def values(self, resources: ResourcesDict) -> dict[str, str]:
        student = self.student_id or resources.get("nbgrader", {}).get("student") or ""
        return {"GRADED_STUDENT_ID": student}
