"""Throwaway courses built from the repository's real configuration, and notebooks to grade.

The ``mini`` assignment (``tests/files/mini_course``: ``square`` and ``cube``, no numpy,
so its kernels start fast) is what the grader's own tests grade; ``CORRECT`` and
``WRONG_SQUARE`` are the learner answers they fill in.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "tests" / "files"
MINI_SOURCE = FILES / "mini_course" / "source" / "mini"

#: Right answers for the ``mini`` assignment's two solution cells (4 points of 4).
CORRECT = {"square": "def square(x):\n    return x ** 2", "cube": "def cube(x):\n    return x ** 3"}
#: ``square`` wrong for negative inputs: its hidden test fails (2 points of 4).
WRONG_SQUARE = {"square": "def square(x):\n    return abs(x) * x", "cube": CORRECT["cube"]}


def sandbox_available() -> bool:
    """True when the bubblewrap sandbox can run here (always, after `make test`'s setup)."""
    try:
        from autograder.sandbox import sandbox_problem
    except ImportError:
        return False
    return sandbox_problem() is None


def new_course(root: Path, assignments: dict[str, Path]) -> Path:
    """A course at ``root`` with the repo's nbgrader_config.py and the given source folders."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for name, folder in assignments.items():
        shutil.copytree(folder, root / "source" / name)
    return root


def released_notebook(course: Path, assignment: str, notebook: str) -> nbformat.NotebookNode:
    """The release of ``assignment`` in ``course``, generated first if it is not there."""
    path = course / "release" / assignment / f"{notebook}.ipynb"
    if not path.exists():
        from autograder.release import release

        release(assignment, course=course, check=False)
    return nbformat.read(path, as_version=4)


def ready_mini_course(root: Path, source: Path = MINI_SOURCE) -> Path:
    """A course at ``root`` holding ``source`` as the ``mini`` assignment, released, its
    template built and its gradebook synced, so that grading it starts at once."""
    from autograder.grading.template import build_template, sync_gradebook

    course = new_course(root, {"mini": source})
    released_notebook(course, "mini", "mini")
    _, template_hash = build_template(course, "mini")
    sync_gradebook(course, "mini", template_hash)
    return course


def lesson_preload() -> tuple[str, ...]:
    """What a lesson's warm parent imports (every lesson's source imports numpy and
    matplotlib): the tests that configure the sandbox by hand give their parents the same."""
    from autograder.sandbox import preload_for

    return preload_for({"numpy", "matplotlib"})


def job_factory(course: Path, scratch: Path):
    """``make(student, **cell_sources)``: a sandboxed job of the ``mini`` assignment of
    ``course`` (released, template built), its notebook the release with ``CORRECT``
    answers and the given cells filled in."""
    from autograder import sandbox
    from autograder.grading.job import RunSpec
    from autograder.grading.template import build_template

    template, _ = build_template(course, "mini")
    release = released_notebook(course, "mini", "mini")
    scratch.mkdir(exist_ok=True)

    def make(student: str, **sources: str):
        spec = RunSpec("mini", "mini", template, scratch, 10, sandbox=True, limits=sandbox.Limits())
        return spec.job(student, nbformat.writes(fill(release, **{**CORRECT, **sources})).encode())

    return make


def fill(nb: nbformat.NotebookNode, **sources: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` with the cells whose grade_id is a keyword replaced by its source."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in sources:
            cell.source = sources[gid]
    return out


def write_nb(path: Path, nb) -> Path:
    """Write ``nb`` (a notebook, or raw ``str``/``bytes`` for a broken one) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(nb, (str, bytes)):
        path.write_bytes(nb if isinstance(nb, bytes) else nb.encode())
    else:
        nbformat.write(nb, path)
    return path


def load_json(path: Path):
    """The JSON document at ``path``."""
    return json.loads(Path(path).read_text())


#: What a sample's ``expected.json`` says of an answer graded by hand: no score of the
#: autograder's, it waits for a person.
BY_HAND = "by hand"


def autograded_expectations(assignment: str) -> dict[str, dict[str, float]]:
    """``tests/files/<assignment>/expected.json`` without the answers graded by hand:
    ``{scenario: {grade_id: points}}`` for the autograder's test cells."""
    every = load_json(FILES / assignment / "expected.json")
    return {
        scenario: {g: points for g, points in cells.items() if points != BY_HAND}
        for scenario, cells in every.items()
    }
