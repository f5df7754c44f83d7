"""The code follows the project's ruff configuration (pyproject.toml)."""

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.course import REPO

RUFF = Path(sys.executable).with_name("ruff")
PATHS = ["autograder", "specdec_reference", "tests", "benchmarks"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_passes(command):
    proc = subprocess.run([str(RUFF), *command, *PATHS], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------
# The package's import graph follows the pipeline
# ---------------------------------------------------------------------------------------

PACKAGE = REPO / "autograder"

#: The layers of ``autograder``, lowest first: a module may import from its own layer or a
#: lower one, never a higher one.  A name ending in ``.*`` is a package and its modules.
LAYERS = [
    [
        "autograder",
        "autograder.cells",
        "autograder.course",
        "autograder.defaults",
        "autograder.files",
    ],
    ["autograder.demonstrations"],
    ["autograder.integrity.*"],
    ["autograder.sandbox.*"],
    ["autograder.preprocessors.*"],
    ["autograder.intake.*"],
    ["autograder.grading.*"],
    ["autograder.render.*"],
    ["autograder.record.*"],
    ["autograder.feedback", "autograder.report", "autograder.lab"],
    [
        "autograder.grade",
        "autograder.release",
        "autograder.export",
        "autograder.cluster",
        "autograder.handout.*",
    ],
    ["autograder.demo"],
    ["autograder.cli"],
    ["autograder.entry", "autograder.__main__"],
]

#: Imports inside a function body, each with the reason it is there (see the comment at it).
LAZY_IMPORTS = {
    # matplotlib is heavy and only the font cache needs it; importing builds that cache
    ("autograder.sandbox.mounts", "matplotlib"),
    # distributed (the optional [dask] extra) takes a second to import: --scheduler/--cluster only
    ("autograder.grade", "autograder.grading.cluster_pool"),
    # the command's imports come after it has started grade's forkserver, to run side by side
    ("autograder.entry", "autograder.cli"),
    # each verb's module is imported by the function that runs it, nbgrader's gradebook
    # (RecordError) after the parsing: --help and a usage error import none of them
    ("autograder.cli", "autograder.release"),
    ("autograder.cli", "autograder.grade"),
    ("autograder.cli", "autograder.export"),
    ("autograder.cli", "autograder.feedback"),
    ("autograder.cli", "autograder.report"),
    ("autograder.cli", "autograder.demo"),
    ("autograder.cli", "autograder.handout.kit"),
    ("autograder.cli", "autograder.render.terminal"),
    ("autograder.cli", "autograder.grading.gradebook"),
    # nbgrader and traitlets only where a course is opened: UsageError and find_course
    # (the command's parsing) do without them
    ("autograder.course", "traitlets.config.loader"),
    ("autograder.course", "nbgrader.apps"),
    ("autograder.course", "nbgrader.coursedir"),
    ("autograder.course", "nbgrader.api"),
    ("autograder.course", "alembic.script"),
    # the parser offers the layout names of intake.detect, which imports every layout:
    # nbgrader (the exchange's timestamps) and yaml (Gradescope's metadata) wait for a download
    ("autograder.intake.exchange", "nbgrader.utils"),
    ("autograder.intake.gradescope", "yaml"),
    # ... and anyascii (the transliteration tables) waits for a student's name to fold
    ("autograder.intake.records", "anyascii"),
}


#: Modules that run inside the sandbox as their own source text, not imported by the
#: grader: they import what the kernel needs where they need it.
IN_THE_SANDBOX = {
    ("integrity", "monitor.py"),  # runs in the kernel
    ("sandbox", "warm_parent.py"),  # the warm parent that kernels are forked from
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, ast.Module]:
    return {
        _module_name(path): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
        if (path.parent.name, path.name) not in IN_THE_SANDBOX
    }


def _imports(tree: ast.Module, known: set[str]) -> list[tuple[str, bool]]:
    """(imported module, inside a function?) for every ``autograder`` import in ``tree``."""
    found = []
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    nested = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from autograder import sandbox`` imports the module autograder.sandbox
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        found += [(name, id(node) in nested) for name in names]
    return found


def _layer(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        for entry in layer:
            if module == entry.removesuffix(".*") or (
                entry.endswith(".*") and module.startswith(entry[:-1])
            ):
                return i
    raise AssertionError(f"{module} is in no layer of tests/test_lint.py's LAYERS")


@functools.cache  # read by several tests; the tree does not change during a run
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {
        name: {dst for dst, _ in _imports(tree, known) if dst in known and dst != name}
        for name, tree in modules.items()
    }


def test_no_module_imports_from_a_layer_above_it():
    upward = [
        f"{src} (layer {_layer(src)}) imports {dst} (layer {_layer(dst)})"
        for src, targets in _graph().items()
        for dst in sorted(targets)
        if _layer(dst) > _layer(src)
    ]
    assert upward == []


#: What rendering reads: the results and the grades read back from the gradebook, never
#: the intake (a roster is handed over as a sheet) nor the record stage that calls it.
RENDER_READS = (
    "autograder.render.",
    "autograder.grading.results",
    "autograder.grading.gradebook_grades",
    "autograder.course",
    "autograder.cells",
    "autograder.files",
)


def test_render_depends_only_on_results():
    outside = [
        f"{src} imports {dst}"
        for src, targets in _graph().items()
        if src.startswith("autograder.render.")
        for dst in sorted(targets)
        if not dst.startswith(RENDER_READS)
    ]
    assert outside == []


def test_the_package_has_no_import_cycle():
    graph = _graph()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(node) :], node]))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])


def test_imports_inside_functions_are_the_deliberate_ones():
    inside = set()
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import):
                        inside |= {(name, alias.name) for alias in sub.names}
                    elif isinstance(sub, ast.ImportFrom) and sub.module:
                        inside.add((name, sub.module))
    assert inside == LAZY_IMPORTS


def _mentions(doc: str, package: str, name: str) -> bool:
    """Whether a package docstring names its module or subpackage ``name``."""
    return bool(
        re.search(rf"~?{re.escape(package)}\.{name}`", doc)
        or re.search(rf":mod:`\.{name}`", doc)
        or re.search(rf"``{name}(\.py|/)``", doc)
    )


@pytest.mark.parametrize(
    "package",
    sorted(
        str(init.parent.relative_to(REPO))
        for top in ("autograder", "specdec_reference")
        for init in (REPO / top).rglob("__init__.py")
    ),
)
def test_every_module_is_in_its_package_docstring(package):
    """A package's docstring is its map: each module and subpackage is named in it."""
    folder = REPO / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    names = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
    names |= {d.name for d in folder.iterdir() if (d / "__init__.py").is_file()}
    dotted = package.replace("/", ".")
    missing = sorted(n for n in names if not _mentions(doc, dotted, n))
    assert not missing, f"{package}/__init__.py's docstring does not name {missing}"
