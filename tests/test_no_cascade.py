"""Every lesson: a graded function's test cells put the reference in place of its callees.

A learner's function may call another graded function of the same lesson (``ridge_batch``
calls ``step_time``, which calls ``weight_bytes``).  Each test cell of a graded function
must then bind the reference to every graded function it could call, so that a bug in
the callee costs points only in the callee's own cells (no cascade).

What a function could call is read statically from the source notebook: the graded
functions its reference solution names, and those its docstring's prose writes as a
call (``step_time(model, hardware, batch, 0)``; doctest lines are left out), closed
under "calls": a learner may call the callee's callees directly.  A test cell binds a
name with ``use_reference_for_cell(globals(), "name", ...)`` or
``use_reference(globals(), "name", ...)``.  The test runs in the fast tier: it parses
the notebooks, nothing more.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

import pytest
from support.course import REPO

SOURCE = REPO / "source"
LESSONS = sorted(p.parent.name for p in SOURCE.glob("*/*.ipynb"))

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BINDING = re.compile(r"""use_reference(?:_for_cell)?\(\s*globals\(\),\s*["'](\w+)["']""")


@dataclass(frozen=True)
class Graded:
    """One graded function of a lesson: its solution cell and what its code and docs name."""

    name: str
    grade_id: str
    named_in_code: frozenset[str]
    called_in_docs: frozenset[str]
    params: frozenset[str]
    required: frozenset[str]


def _cells(lesson: str) -> list[dict]:
    (path,) = (SOURCE / lesson).glob("*.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _docs_prose(function: ast.FunctionDef) -> str:
    """The docstring without its doctest lines (examples call other functions to build inputs)."""
    doc = ast.get_docstring(function) or ""
    return "\n".join(
        line for line in doc.splitlines() if not line.lstrip().startswith((">>>", "..."))
    )


def graded_functions(lesson: str) -> dict[str, Graded]:
    """Every function defined in a solution cell of the lesson, by name."""
    found: dict[str, Graded] = {}
    for cell in _cells(lesson):
        meta = _nbgrader(cell)
        if cell["cell_type"] != "code" or not meta.get("solution"):
            continue
        tree = ast.parse("".join(cell["source"]))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
                    n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                }
                calls = set(re.findall(r"\b(\w+)\(", _docs_prose(node)))
                args = [a.arg for a in node.args.posonlyargs + node.args.args]
                required = args[: len(args) - len(node.args.defaults)]
                found[node.name] = Graded(
                    node.name,
                    meta["grade_id"],
                    frozenset(names),
                    frozenset(calls),
                    frozenset(args),
                    frozenset(required),
                )
    return found


def could_call(lesson: str) -> dict[str, set[str]]:
    """For each graded function, the other graded functions it could call, transitively."""
    graded = graded_functions(lesson)
    order = list(graded)
    direct = {
        name: ((g.named_in_code | g.called_in_docs) & graded.keys())
        # an earlier function whose required arguments this one is given, by name
        | {e for e in order[: order.index(name)] if graded[e].required <= g.params}
        for name, g in graded.items()
    }
    direct = {name: callees - {name} for name, callees in direct.items()}
    closed: dict[str, set[str]] = {}
    for name in graded:
        seen: set[str] = set()
        todo = list(direct[name])
        while todo:
            callee = todo.pop()
            if callee not in seen and callee != name:
                seen.add(callee)
                todo += direct[callee]
        closed[name] = seen
    return closed


def lesson_test_cells(lesson: str) -> dict[str, tuple[str, str]]:
    """{test grade_id: (the solution grade_id it tests, its source)}."""
    cells = _cells(lesson)
    solutions = sorted(
        (_nbgrader(c)["grade_id"] for c in cells if _nbgrader(c).get("solution")),
        key=len,
        reverse=True,
    )
    tests = {}
    for cell in cells:
        meta = _nbgrader(cell)
        if meta.get("grade") and cell["cell_type"] == "code":
            gid = meta["grade_id"]
            owner = next(
                (s for s in solutions if gid == f"test_{s}" or gid.startswith(f"test_{s}_")), None
            )
            tests[gid] = (owner, "".join(cell["source"]))
    return tests


def cascade_problems(lesson: str) -> list[str]:
    """One line per test cell that leaves a callee of its function to the learner."""
    graded = graded_functions(lesson)
    callees = could_call(lesson)
    problems = []
    for gid, (owner, source) in sorted(lesson_test_cells(lesson).items()):
        bound = set(BINDING.findall(source))
        for name, g in graded.items():
            if g.grade_id != owner:
                continue
            missing = sorted(callees[name] - bound)
            if missing:
                problems.append(
                    f"{lesson}: {gid} tests {name}, which could call {', '.join(missing)}, "
                    "but does not bind the reference to it"
                )
    return problems


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_test_cell_binds_the_reference_to_every_graded_callee(lesson):
    assert cascade_problems(lesson) == []


def test_the_call_graph_is_read_from_code_docs_and_signatures():
    """E7.1: ridge_batch's code calls step_time, which calls the counting functions;
    verify_cost_ratio(model, hardware, k) is given all that ridge_batch(model, hardware)
    needs, so it could call it; nothing comes before weight_bytes."""
    callees = could_call("e7_1_why_decoding_is_slow")
    counting = {"weight_bytes", "flops_per_token", "kv_cache_bytes"}
    assert callees["ridge_batch"] == {"step_time"} | counting
    assert callees["verify_cost_ratio"] == {"step_time", "ridge_batch"} | counting
    assert callees["weight_bytes"] == set()
    assert callees["kv_cache_bytes"] == set()


def test_a_test_cell_without_its_bindings_is_found(tmp_path, monkeypatch):
    """Drop one binding from a copy of E7.1 and the check names the cell and the callee."""
    lesson = "e7_1_why_decoding_is_slow"
    (path,) = (SOURCE / lesson).glob("*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if _nbgrader(cell).get("grade_id") == "test_ridge_batch_values":
            cell["source"] = [line for line in cell["source"] if '"flops_per_token"' not in line]
    (tmp_path / lesson).mkdir()
    (tmp_path / lesson / path.name).write_text(json.dumps(notebook), encoding="utf-8")
    monkeypatch.setitem(globals(), "SOURCE", tmp_path)
    assert cascade_problems(lesson) == [
        f"{lesson}: test_ridge_batch_values tests ridge_batch, which could call "
        "flops_per_token, but does not bind the reference to it"
    ]
