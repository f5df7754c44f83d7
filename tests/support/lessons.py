"""Test support shared by every lesson: run its notebook in this process, or Run all in a kernel.

A lesson's tests (``tests/test_<lesson>_hidden_tests.py``) start with ::

    from support.lessons import Lesson, failing

    LESSON = Lesson("e7_3_accept_step", support_cells={"code-setup"})

and then run the source notebook's cells with learner code of their choosing.  The
lesson's sample scenarios come from ``tests/files/<assignment>/build_samples.py``; the
engine that writes the sample notebooks is ``tests/files/sample_builder.py``.

API
---
``Lesson(assignment, *, support_cells=())``
    The source notebook of ``source/<assignment>/`` and its samples:
    ``source_nb``, ``test_cells``, ``solution_cells`` and ``written_cells`` (answers
    graded by hand) (``{grade_id: cell}``, in notebook order), ``points`` and
    ``written_points`` (``{grade_id: points}``), ``reference_bodies``
    (``{grade_id: solution body}``), ``scenarios`` (``build_samples.SCENARIOS``) and
    ``expected`` (``expected.json``).  ``support_cells`` are the ids of ungraded code
    cells to run too (imports, a toy model a visible assert uses); the other ungraded
    cells (plots, demonstrations) are skipped.
``Lesson.run(bodies=None, *, only=None, replace=None) -> Run``
    Run the solution cells (``bodies`` replace solution regions, the reference fills
    the others), the support cells and the test cells (only those in ``only`` if given;
    ``replace`` substitutes text in every test cell, e.g. other seeds) in one namespace,
    the way a kernel runs them.  Like IPython, the namespace holds ``_ih`` (the cells
    run so far) and ``get_ipython()``, whose ``post_run_cell`` callbacks run after every
    cell, which is what ``specdec_reference.testing.use_reference_for_cell`` needs.
``Run``: ``outcomes`` (``{grade_id: Outcome}``) and the final ``namespace``.
``Outcome``: ``passed``, ``message`` (``"AssertionError: ..."``), ``seconds``.
``Lesson.message_coverage_problems``, ``Lesson.loss_problems``,
``Lesson.reference_import_problems``, ``Lesson.missing_docstring_phrases``,
``Lesson.docstring_example_counts``, ``Lesson.docstring_examples`` and
``Lesson.hidden_names_in_visible_asserts``: the checks of the contract every lesson keeps
(``tests/test_lesson_contracts.py``).
``failing(outcomes) -> {grade_id: message}`` of the cells that failed.
``learner_cell(source_cell, body) -> str``: a solution cell with ``body`` as its solution.
``run_all(notebook, *, cwd) -> RunAll``: Run all in a real kernel, timed (kernel CPU
    seconds, wall seconds, ids of the cells that raised).
``grade_samples(assignment, names, root) -> {student: result}``: grade some samples
    with the course's grader in a throwaway course under ``root``.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import json
import re
import shutil
import textwrap
import time
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from support.course import FILES, REPO, autograded_expectations

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def _load(path: Path, name: str) -> ModuleType:
    """Import the Python file at ``path`` as a module named ``name`` (tests/files is no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Outcome:
    """How one test cell ended, as nbgrader would score it."""

    passed: bool
    message: str
    seconds: float = 0.0


@dataclass
class Run:
    """The test cells' outcomes of one run and the namespace the cells ran in."""

    outcomes: dict[str, Outcome]
    namespace: dict[str, Any]


class _Events:
    """The part of IPython's EventManager that use_reference_for_cell uses."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[..., None]] = []

    def register(self, event: str, fn: Callable[..., None]) -> None:
        self.callbacks.append(fn)

    def unregister(self, event: str, fn: Callable[..., None]) -> None:
        self.callbacks.remove(fn)


def learner_cell(source_cell: str, body: str) -> str:
    """Return the source solution cell with its solution region replaced by ``body``."""
    lines = source_cell.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
    stop = next(i for i, line in enumerate(lines) if line.strip() == END)
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    code = textwrap.indent(textwrap.dedent(body).strip("\n"), indent).splitlines()
    return "\n".join(lines[:start] + code + lines[stop + 1 :])


def failing(outcomes: Mapping[str, Outcome]) -> dict[str, str]:
    """Return ``{grade_id: message}`` for the test cells that failed."""
    return {gid: o.message for gid, o in outcomes.items() if not o.passed}


@dataclass
class Lesson:
    """A lesson's source notebook, its sample scenarios, and an in-process kernel for both."""

    assignment: str
    support_cells: Collection[str] = ()
    source_nb: nbformat.NotebookNode = field(init=False, repr=False)

    def __post_init__(self) -> None:
        [path] = sorted((REPO / "source" / self.assignment).glob("*.ipynb"))
        self.source_nb = nbformat.read(path, as_version=4)
        self.samples_dir = FILES / self.assignment
        self.samples = _load(self.samples_dir / "build_samples.py", f"{self.assignment}_samples")
        self.builder = _load(FILES / "sample_builder.py", "sample_builder")
        self.reference_bodies = self.builder.reference_bodies(self.source_nb)
        # An answer graded by hand is both a solution and a grade cell; it is neither an
        # autograder test nor a function to run.
        self.written_cells = self._cells(lambda m: m.get("solution") and m.get("grade"))
        self.test_cells = self._cells(lambda m: m.get("grade") and not m.get("solution"))
        self.solution_cells = self._cells(lambda m: m.get("solution") and not m.get("grade"))
        self.points = {g: c.metadata["nbgrader"]["points"] for g, c in self.test_cells.items()}
        self.written_points = {
            g: c.metadata["nbgrader"]["points"] for g, c in self.written_cells.items()
        }

    def _cells(self, keep: Callable[[dict], Any]) -> dict[str, nbformat.NotebookNode]:
        return {
            c.metadata["nbgrader"]["grade_id"]: c
            for c in self.source_nb.cells
            if keep(c.metadata.get("nbgrader", {}))
        }

    @property
    def scenarios(self) -> dict[str, dict[str, str]]:
        """``build_samples.SCENARIOS``: {scenario: {grade_id: solution body}}."""
        return self.samples.SCENARIOS

    def build_samples(self, argv: list[str]) -> int:
        """Run ``build_samples.py`` with ``argv`` in this process; return its exit code."""
        return self.builder.main(self.samples_dir, self.scenarios, argv)

    @property
    def expected(self) -> dict[str, dict[str, float]]:
        """``expected.json``'s autograded cells: {scenario: {grade_id: points}}.  Its
        written answers, ``"by hand"`` in every scenario, are :attr:`written_cells`."""
        return autograded_expectations(self.assignment)

    def lost_cells(self, scenario: str) -> set[str]:
        """The test cells on which sample ``scenario`` scores zero (``expected.json``)."""
        return {gid for gid, points in self.expected[scenario].items() if points == 0}

    def message_coverage_problems(
        self,
        messages: Mapping[str, Mapping[str, str]],
        *,
        exempt: Collection[str] = ("mistake-imports-reference",),
    ) -> list[str]:
        """What keeps ``messages`` ({mistake sample: {lost cell: words}}) from covering every
        sample mistake but ``exempt``, each for exactly the cells that the sample loses.

        The sample that imports the reference is exempt by default: it loses every cell
        after its import, which :meth:`reference_import_problems` checks."""
        mistakes = {s for s in self.scenarios if s.startswith("mistake-")} - set(exempt)
        problems = [f"{s}: no messages given" for s in sorted(mistakes - set(messages))]
        problems += [f"{s}: not a sample mistake" for s in sorted(set(messages) - mistakes)]
        problems += [
            f"{s}: messages for {sorted(m)}, but it loses {sorted(self.lost_cells(s))}"
            for s, m in messages.items()
            if s in mistakes and set(m) != self.lost_cells(s)
        ]
        return problems

    def loss_problems(
        self,
        bodies: Mapping[str, str],
        lost: Mapping[str, str],
        *,
        only: Collection[str] | None = None,
        form: Mapping[str, str] | None = None,
    ) -> list[str]:
        """How learner code ``bodies``, run on the test cells ``only`` (by default those of
        ``lost``), fails to lose exactly the cells of ``lost`` ({cell: words}), each with a
        message that says its words and matches every pattern of ``form`` ({what every
        message has: regular expression})."""
        failed = failing(self.run(bodies, only=set(lost) if only is None else only).outcomes)
        problems = [] if set(failed) == set(lost) else [f"lost {sorted(failed)}"]
        for gid, message in failed.items():
            if gid in lost and lost[gid] not in message:
                problems.append(f"{gid}: {message!r} does not say {lost[gid]!r}")
            problems += [
                f"{gid}: {message!r} lacks {what}"
                for what, pattern in (form or {}).items()
                if not re.search(pattern, message)
            ]
        return problems

    def reference_import_problems(self, scenario: str = "mistake-imports-reference") -> list[str]:
        """How sample ``scenario``, whose learner code imports the reference, fails to lose
        every test cell after the first solution cell that imports it, each with a message
        that names the reference implementation.  The test cells before that one ran before
        the import and pass (the course's grader forfeits them all the same)."""
        bodies = self.scenarios[scenario]
        order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in self.source_nb.cells]
        importing = [order.index(g) for g, body in bodies.items() if "specdec_reference" in body]
        if not importing:
            return [f"{scenario}: no solution body imports specdec_reference"]
        after = {g for g in self.test_cells if order.index(g) > min(importing)}
        lost = failing(self.run(bodies).outcomes)
        problems = [] if set(lost) == after else [f"lost {sorted(lost)}, not {sorted(after)}"]
        problems += [f"{g}: {m!r}" for g, m in lost.items() if "reference implementation" not in m]
        return problems

    def _docstring(self, grade_id: str) -> str:
        """The docstring of solution cell ``grade_id``, as its source writes it."""
        source = self.solution_cells[grade_id].source
        return source[source.index('"""') : source.index(BEGIN)]

    def missing_docstring_phrases(self, grade_id: str, phrases: Collection[str]) -> list[str]:
        """The ``phrases`` that the docstring of solution cell ``grade_id`` does not state."""
        docstring = " ".join(self._docstring(grade_id).split())
        return [phrase for phrase in phrases if phrase not in docstring]

    def docstring_example_counts(self, names: Collection[str]) -> dict[str, int]:
        """``{name: examples its docstring gives}`` for these graded functions, read from the
        source (nothing runs)."""
        parser = doctest.DocTestParser()
        return {name: len(parser.get_examples(self._docstring(name))) for name in names}

    def docstring_examples(self, names: Collection[str]) -> tuple[int, int]:
        """(examples run, examples failed) of the doctests in these functions' docstrings,
        run against the reference solutions."""
        ns = self.run(only=set()).namespace
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        examples = 0
        for name in names:
            for test in doctest.DocTestFinder().find(ns[name], name, globs=dict(ns)):
                examples += len(test.examples)
                runner.run(test, out=lambda _text: None)
        return examples, runner.failures

    def hidden_names_in_visible_asserts(self, names: Collection[str]) -> list[str]:
        """``"<grade_id>: <name>"`` for each of ``names`` that a test cell uses outside its
        hidden part (a visible assert must run in the learner's release, without them)."""
        found = []
        for gid, cell in self.test_cells.items():
            visible = re.sub(
                r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", cell.source, flags=re.S
            )
            found += [f"{gid}: {name}" for name in names if name in visible]
        return found

    def run(
        self,
        bodies: Mapping[str, str] | None = None,
        *,
        only: Collection[str] | None = None,
        replace: Mapping[str, str] | None = None,
    ) -> Run:
        """Run the notebook's solution, support and test cells (see the module docstring)."""
        bodies = {**self.reference_bodies, **(bodies or {})}
        events = _Events()
        shell = type("Shell", (), {"events": events})()
        # The hidden tests record whether the reference was imported before they were; in
        # this process it always is (pytest imports it), so record a fresh kernel's answer.
        ns: dict[str, Any] = {
            "__name__": "__main__",
            "_ih": [""],
            "get_ipython": lambda: shell,
            "_specdec_preloaded": False,
        }
        outcomes = {}
        for cell in self.source_nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code":
                continue
            if meta.get("solution"):
                source = learner_cell(cell.source, bodies[meta["grade_id"]])
            elif meta.get("grade"):
                if only is not None and meta["grade_id"] not in only:
                    continue
                source = cell.source
                for old, new in (replace or {}).items():
                    source = source.replace(old, new)
            elif cell.id in self.support_cells:
                source = cell.source
            else:
                continue
            ns["_ih"].append(source)
            start = time.perf_counter()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    exec(compile(source, f"<cell {cell.id}>", "exec"), ns)
                passed, message = True, ""
            except Exception as exc:  # a failing cell, as nbgrader scores it
                passed, message = False, f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - start
            for callback in list(events.callbacks):
                callback(None)
            if meta.get("grade"):
                outcomes[meta["grade_id"]] = Outcome(passed, message, seconds)
        return Run(outcomes, ns)


@dataclass
class RunAll:
    """A timed Run all: the kernel's CPU seconds, the wall seconds, the cells that raised,
    and the figures shown without a title or an axis label."""

    cpu_seconds: float
    wall_seconds: float
    errors: list[str]
    unlabelled: list[str]


# Run before the notebook: each plt.show() notes the plots that lack a title (their own, or
# the figure's) or an axis label.  Axes that draw nothing (a colour bar's, a hidden one's)
# are not plots.
FIGURE_PROBE = """\
import json as _json
import matplotlib.pyplot as _plt
_unlabelled, _show = [], _plt.show


def _labelled_show(*args, **kwargs):
    for number in _plt.get_fignums():
        figure = _plt.figure(number)
        suptitle = figure._suptitle.get_text() if figure._suptitle else ""
        for ax in figure.axes:
            if not ax.get_visible() or not ax.has_data() or ax.get_label() == "<colorbar>":
                continue
            lacks = [name for name, text in (("title", ax.get_title() or suptitle),
                     ("x label", ax.get_xlabel()), ("y label", ax.get_ylabel())) if not text]
            if lacks:
                name = ax.get_title() or suptitle or "a plot"
                _unlabelled.append(f"{name}: no {', '.join(lacks)}")
    return _show(*args, **kwargs)


_plt.show = _labelled_show
"""


#: Seconds a cell of :func:`run_all` may run: a guard against a hang only.  How long the
#: cells take is ``benchmarks/run_all.py``'s to measure; a demonstration that times itself
#: runs many times slower on a busy machine, and that is no error.
HANG_GUARD = 900


def run_all(notebook: Path, *, cwd: Path = REPO) -> RunAll:
    """Run every cell of ``notebook`` in a fresh python3 kernel; kernel start is not timed.

    The CPU time is the kernel's own (``time.process_time`` inside it), which other
    processes on a busy machine do not inflate; on an idle machine the wall time is
    about the same.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    start = nbformat.v4.new_code_cell("import time as _clock\n_cpu = _clock.process_time()")
    stop = nbformat.v4.new_code_cell("print(_clock.process_time() - _cpu)")
    probe = nbformat.v4.new_code_cell(FIGURE_PROBE)
    shown = nbformat.v4.new_code_cell("print(_json.dumps(_unlabelled))")
    nb.cells = [probe, start, *nb.cells, stop, shown]
    client = NotebookClient(
        nb,
        timeout=HANG_GUARD,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    )
    with client.setup_kernel():
        began = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        wall = time.perf_counter() - began
    errors = [
        c.get("id")
        for c in nb.cells
        if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)
    ]
    unlabelled = json.loads(shown.outputs[0]["text"])
    return RunAll(float(stop.outputs[0]["text"]), wall, errors, unlabelled)


def grade_samples(
    assignment: str, names: Collection[str], root: Path, *, fork: bool = True
) -> dict[str, dict]:
    """Grade the named samples of ``assignment`` with the course's grader: {student: result}.

    Each result is the plain dict of the JSON the grader writes to ``results/``.  With
    ``fork=False`` every kernel starts fresh (``--no-fork``).
    """
    from autograder.grade import Harness, grade
    from support.course import new_course, sandbox_available

    course = new_course(root / "course", {assignment: REPO / "source" / assignment})
    submissions = root / "submissions"
    submissions.mkdir()
    for name in names:
        shutil.copy(FILES / assignment / "submissions" / f"{name}.ipynb", submissions)
    result = grade(
        assignment,
        submissions=submissions,
        course=course,
        workers=2,
        sandbox=sandbox_available(),
        fork=fork,
        harness=Harness(feedback=False),
    )
    return {student: json.loads(r.to_json()) for student, r in result.results.items()}
