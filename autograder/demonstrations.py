"""Demonstration cells: the author's mark, which cells the grader skips, and the static
check that skipping them cannot change a grade.

An author marks a demonstration (a timing cell, a parameter sweep, a plot, a measured
comparison, an explorer) in ``source/`` with the cell tag :data:`DEMO_TAG` on a read-only
code cell (nbgrader's "Read-only": ``locked``, with a ``grade_id``).  The release keeps it
read-only, so nbgrader's ``OverwriteCells`` restores its source from the source notebook
at grading.

The grader skips the cells whose ``grade_id`` is marked in the *source* notebook it holds
(:func:`skipped_ids`): what a submission's metadata says (a tag removed, added, or
edited) decides nothing.  Learner code runs in the kernel, a process apart from the grader
that makes the decision before the kernel starts.

:func:`mark_problems` is what ``release`` refuses: a mark on a cell that is not read-only,
and a marked cell that defines a name a solution, test or later unmarked cell uses.
"""

from __future__ import annotations

import ast
import functools
import json
import symtable
from collections.abc import Mapping, Sequence
from pathlib import Path

from autograder.cells import nbgrader_meta

#: The cell tag that marks a demonstration in ``source/``.
DEMO_TAG = "demo"

#: What a skipped cell shows in the graded notebook and the feedback.
SKIPPED_NOTE = "[not run by the grader: a demonstration, which scores nothing]\n"


def is_marked(cell: Mapping) -> bool:
    """True when the cell carries the demonstration tag."""
    return DEMO_TAG in (cell.get("metadata", {}).get("tags") or [])


def skipped_ids(cells: Sequence[Mapping]) -> frozenset[str]:
    """The ``grade_id`` of every marked read-only code cell of a source notebook's ``cells``:
    the cells the grader skips."""
    return frozenset(
        nbgrader_meta(cell)["grade_id"]
        for cell in cells
        if is_marked(cell) and _read_only_code(cell)
    )


@functools.cache
def source_skipped_ids(source_notebook: Path) -> frozenset[str]:
    """:func:`skipped_ids` of the source notebook at ``source_notebook`` (a template's copy,
    which never changes under its path)."""
    return skipped_ids(json.loads(source_notebook.read_bytes())["cells"])


def _read_only_code(cell: Mapping) -> bool:
    meta = nbgrader_meta(cell)
    return (
        cell.get("cell_type") == "code"
        and bool(meta.get("locked"))
        and bool(meta.get("grade_id"))
        and not meta.get("solution")
        and not meta.get("grade")
    )


def mark_problems(cells: Sequence[Mapping]) -> list[str]:
    """Why skipping the marked cells of a source notebook's ``cells`` could change a grade
    (empty when it cannot): a mark on a cell that is not a read-only code cell, and each
    name a marked cell defines that a solution or test cell, or a later unmarked cell,
    uses."""
    problems = [
        f"cell {i} ({_name(cell)}) is marked {DEMO_TAG!r} but is not a read-only code cell "
        "(nbgrader's 'Read-only', with a grade_id): the grader could not restore it"
        for i, cell in enumerate(cells)
        if is_marked(cell) and not _read_only_code(cell)
    ]
    return problems + _dependency_problems(cells)


def _dependency_problems(cells: Sequence[Mapping]) -> list[str]:
    """Names the unmarked code cells take from marked ones (see :func:`mark_problems`).

    Cells are read in order.  A name a cell uses as it runs, before binding it, comes from
    the last cell that bound it; a name used inside a function is looked up when the
    function is called, perhaps cells later, so it counts when only marked cells bind it.
    """
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    scopes = {i: _CellNames.of(_source(c)) for i, c in code}
    bound_by_unmarked = set().union(*(scopes[i].binds for i, c in code if not is_marked(c)))
    last_binder: dict[str, int] = {}
    problems = []
    for i, cell in code:
        names = scopes[i]
        if not is_marked(cell):
            for name in sorted(names.uses_first):
                j = last_binder.get(name)
                if j is not None and is_marked(cells[j]):
                    problems.append(_problem(cells, j, name, i))
            for name in sorted(names.uses_later - bound_by_unmarked - names.uses_first):
                j = next((j for j, c in code if is_marked(c) and name in scopes[j].binds), None)
                if j is not None:
                    problems.append(_problem(cells, j, name, i))
        for name in names.binds:
            last_binder[name] = i
    return problems


def _problem(cells: Sequence[Mapping], marked: int, name: str, user: int) -> str:
    return (
        f"cell {marked} ({_name(cells[marked])}) is marked {DEMO_TAG!r} and defines "
        f"{name!r}, which cell {user} ({_name(cells[user])}) uses: the grader skips the "
        "marked cell, so move the name to an unmarked cell or leave the cell unmarked"
    )


def _name(cell: Mapping) -> str:
    gid = nbgrader_meta(cell).get("grade_id")
    if gid:
        return gid
    first = next((ln.strip() for ln in _source(cell).splitlines() if ln.strip()), "")
    return repr(first[:40])


def _source(cell: Mapping) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


class _CellNames:
    """The global names one cell binds, uses before binding them at its top level
    (``uses_first``), and uses inside its functions and classes (``uses_later``)."""

    def __init__(self) -> None:
        self.binds: set[str] = set()
        self.uses_first: set[str] = set()
        self.uses_later: set[str] = set()

    @classmethod
    def of(cls, source: str) -> _CellNames:
        out = cls()
        python = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
        )
        try:
            tree = ast.parse(python)
        except SyntaxError:  # a cell that does not parse binds and uses nothing we can see
            return out
        for stmt in tree.body:  # in order: a name bound by an earlier statement is local
            text = ast.unparse(stmt)
            top = symtable.symtable(text, "<cell>", "exec")
            uses, binds = set(), set()
            for sym in top.get_symbols():
                if sym.is_referenced():
                    uses.add(sym.get_name())
                if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
                    binds.add(sym.get_name())
            if isinstance(stmt, ast.AugAssign | ast.AnnAssign) or not binds & uses:
                first = uses
            else:  # bound and used by one statement (a for loop): bound first
                first = uses - binds
            out.uses_first |= first - out.binds
            for child in top.get_children():
                later, global_binds = _globals_of(child)
                if child.get_type() == "function" and child.get_name() in _RUN_AT_ONCE:
                    out.uses_first |= later - out.binds - binds
                else:
                    out.uses_later |= later - out.binds - binds
                binds |= global_binds
            out.binds |= binds
        return out


#: Nested scopes that run where they stand (comprehensions), not when called later.
_RUN_AT_ONCE = frozenset({"listcomp", "setcomp", "dictcomp", "genexpr"})


def _globals_of(table: symtable.SymbolTable) -> tuple[set[str], set[str]]:
    """The global names a nested scope (and the scopes in it) uses and binds."""
    uses, binds = set(), set()
    for sym in table.get_symbols():
        if sym.is_global():
            if sym.is_referenced():
                uses.add(sym.get_name())
            if sym.is_declared_global() and sym.is_assigned():
                binds.add(sym.get_name())
    for child in table.get_children():
        u, b = _globals_of(child)
        uses |= u
        binds |= b
    return uses, binds
