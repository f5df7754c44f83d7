"""nbgrader's ``CheckCellMetadata``, with its JSON schema compiled once per process.

nbgrader validates every cell's ``nbgrader`` metadata with ``jsonschema.validate``, which
checks the schema itself against JSON Schema's meta-schema on every call, for every cell
of a notebook, twice per submission (the sanitising pass and the autograding pass).  This
preprocessor runs nbgrader's own validator (its version checks, its rules per cell type)
with one difference: the schema is checked and compiled once per notebook (not once per
cell), and each cell is validated
with that compiled validator, which raises the error ``jsonschema.validate`` would
(``best_match`` of the same errors).
"""

from __future__ import annotations

import traceback

import jsonschema
from nbformat.notebooknode import NotebookNode
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import (
    BaseMetadataValidator,
    SchemaTooNewError,
    SchemaTooOldError,
)
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata


class _CompiledSchema(BaseMetadataValidator):
    """The schema step of ``BaseMetadataValidator.validate_cell``, with a compiled schema."""

    def __init__(self) -> None:
        super().__init__()
        cls = jsonschema.validators.validator_for(self.schema)
        cls.check_schema(self.schema)
        self._validator = cls(self.schema)

    def validate_cell(self, cell: NotebookNode) -> None:
        if "nbgrader" not in cell.metadata:
            return
        schema = cell.metadata["nbgrader"].get("schema_version", 0)
        if schema < self.schema_version:
            raise SchemaTooOldError(
                f"Outdated schema version: {schema} (expected {self.schema_version})",
                schema,
                self.schema_version,
            )
        if schema > self.schema_version:
            raise SchemaTooNewError(
                f"Schema version is too new: {schema} (expected {self.schema_version})",
                schema,
                self.schema_version,
            )
        error = jsonschema.exceptions.best_match(
            self._validator.iter_errors(cell.metadata["nbgrader"])
        )
        if error is not None:
            raise error


class FastMetadataValidator(MetadataValidator, _CompiledSchema):
    """nbgrader's current validator; its ``super().validate_cell`` is the compiled check."""


class CheckCellMetadata(NbgraderCheckCellMetadata):
    """nbgrader's ``CheckCellMetadata`` (same name, same config), schema compiled once."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        try:
            FastMetadataValidator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg) from None
        return nb, resources
