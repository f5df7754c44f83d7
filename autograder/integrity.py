"""Tamper detection: flags for submissions that try to fool the grader.

Learner code and the tests run in the same Python process, so no defence inside the
kernel can be complete.  The grader therefore combines:

* :func:`static_flags`: a scan of the submitted notebook's learner-editable cells for
  code that has no business in a solution (IPython input/AST transformers, event
  callbacks, monkeypatched numpy/math/builtins, trace hooks, ``os._exit``, the
  reference package...);
* :func:`preprocessors`: two nbgrader preprocessors around ``Execute``.  The first
  inserts a grader cell that runs ``_sandbox/monitor.py`` inside the kernel *before any
  learner code* (it snapshots what the tests rely on and installs an audit hook) and
  appends a last cell that asks the monitor for its report.  The second reads that
  report, joins it with the evidence the sandbox received through a pipe that learner
  code cannot take back, writes the flags to the notebook's metadata
  (``specdec_integrity``) and removes both grader cells;
* :func:`runtime_flags`: the flags from that metadata.

Flags are short strings.  ``tamper:*`` and ``uses-reference`` mean the grader saw an
attempt to change how it grades (:func:`forfeits` is true: ``CollectProbes`` then
fails every test cell with an ``IntegrityError`` that gives the reason, so the
submission scores zero); ``suspect:*`` and ``probe-missing`` are for the instructor to
review and change no score.  :func:`describe` gives the reason behind each flag.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

#: Notebook metadata key where the collected integrity result is written.
METADATA_KEY = "specdec_integrity"
#: Cell metadata key marking the grader's own cells (removed after execution).
PROBE_KEY = "specdec_probe"
#: MIME type of the monitor's report.
PROBE_MIME = "application/x-specdec-probe+json"
MONITOR_SOURCE = (Path(__file__).parent / "_sandbox" / "monitor.py").read_text()
REFERENCE_PACKAGES = ("specdec_reference",)

#: Why each flag is raised; shown to the instructor next to the flag.
REASONS = {
    "tamper:input-transformer": "changed IPython's input transformers (can blank out later cells, "
    "the tests included)",
    "tamper:ast-transformer": "added an IPython AST transformer (can rewrite the tests' code)",
    "tamper:event-callback": "registered an IPython event callback from learner code",
    "tamper:custom-exception-handler": "installed a custom exception handler (hides test failures)",
    "tamper:kernel-patched": "replaced a method the kernel uses to run cells or report errors",
    "tamper:monitor-removed": "removed the grader's integrity monitor",
    "tamper:monitor-bypassed": "a test cell ran without the grader's monitor seeing it",
    "tamper:test-altered": "a test cell was compiled from source other than the instructor's",
    "tamper:test-not-run": "a test cell was reported as run but its code never executed",
    "tamper:trace": "installed a trace or profile function (can change running code)",
    "tamper:monkeypatch-numpy": "replaced a numpy function (e.g. np.isclose)",
    "tamper:monkeypatch-math": "replaced a function of the math module",
    "tamper:monkeypatch-builtins": "replaced a Python builtin (abs, float, AssertionError...)",
    "tamper:monkeypatch-operator": "replaced a function of the operator module",
    "tamper:shadowed-builtin": "a test cell would have called learner code under a builtin's "
    "name (e.g. abs = lambda x: 0)",
    "tamper:redefined-test-helper": "rebound a helper that an earlier test cell defined",
    "tamper:patched-reference": "changed the reference package or its check helpers",
    "tamper:fake-reference": "the reference package was loaded from somewhere else",
    "tamper:import-hook": "changed Python's import machinery (meta path, path hooks, sys.modules)",
    "tamper:probe-suppressed": "the grader's last cell ran but produced no report",
    "tamper:probe-forged": "the integrity report did not come from the grader's monitor",
    "uses-reference": "learner code imports or reads the reference implementation",
    "probe-missing": "the grader's integrity report is missing (the kernel died, timed out "
    "or was stopped before the end)",
    "suspect:exit": "stops the kernel or the cell early (os._exit, os.kill, sys.exit, exit...); "
    "the tests that do not run score zero",
    "suspect:signal": "changes signal handling (e.g. ignores interrupts)",
    "suspect:dynamic-code": "runs code built at run time (exec, eval, compile)",
    "suspect:dynamic-import": "imports modules by computed name (importlib, __import__, "
    "sys.modules)",
    "suspect:ipython-internals": "uses IPython or kernel internals (get_ipython(), ipykernel)",
    "suspect:introspection": "uses gc, ctypes, inspect or frames to reach other code's objects",
    "suspect:code-patch": "replaces a function's code, globals, defaults or closure",
    "suspect:shadows-builtin": "defines a name that hides a Python builtin",
    "suspect:stream-redirect": "replaces sys.stdout or sys.stderr",
    "suspect:fake-test-output": "prints text that looks like test results",
    "suspect:course-files": "refers to the course's files (source/, release/, gradebook.db...)",
    "suspect:subprocess": "starts processes (subprocess, os.system, fork, shell escapes)",
    "suspect:network": "opens network connections",
    "suspect:sys-path": "changes sys.path",
}


def describe(flag: str) -> str:
    """The reason behind ``flag``, for the instructor's report."""
    return REASONS.get(flag, flag)


def forfeits(flags: Iterable[str]) -> bool:
    """True when the flags show an attempt to fool the grader: the submission scores zero.

    ``suspect:*`` flags (code that could be innocent) and ``probe-missing`` (often a
    crash, already scored by the tests that did not run) do not forfeit.
    """
    return any(f.startswith("tamper:") or f == "uses-reference" for f in flags)


# ---------------------------------------------------------------------------------------
# The preprocessors around Execute
# ---------------------------------------------------------------------------------------


def preprocessors() -> list[type]:
    """nbgrader preprocessors for ``Autograde.autograde_preprocessors``.

    ``InsertProbes`` (``before_execute = True``) goes right before ``Execute``;
    ``CollectProbes`` right after it (before ``SaveAutoGrades``).
    """
    return [InsertProbes, CollectProbes]


def _is_test_cell(cell: NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _report_source(nonce: str) -> str:
    return f'__import__("sys").modules["_grader_monitor"].report({nonce!r})\n'


def _setup_source(config: dict) -> str:
    code = MONITOR_SOURCE + "\ninstall(CONFIG)\n"
    filename = f"<grader-monitor-{config['nonce']}>"
    # One string constant and a JSON string: the hidden tests' guard, which scans
    # executed cells for the reference package's name, sees neither as a use.
    return (
        f"exec(compile({code!r}, {filename!r}, 'exec'), "
        f"{{'__name__': '_grader_monitor', 'CONFIG': {json.dumps(config)!r}}})\n"
    )


class InsertProbes(NbGraderPreprocessor):
    """Insert the monitor cell first and the report cell last (before ``Execute``)."""

    before_execute = True

    def preprocess(self, nb, resources):
        nb.metadata.pop(METADATA_KEY, None)  # a submission cannot bring its own verdict
        nb.cells = [c for c in nb.cells if PROBE_KEY not in c.get("metadata", {})]
        nonce = secrets.token_hex(8)
        # Only hashes: the test sources (hidden tests included) must not be readable from
        # the monitor cell, which is in the kernel's input history before any learner code.
        tests = [
            (_sha256(c.source), c.metadata["nbgrader"].get("grade_id", ""))
            for c in nb.cells
            if _is_test_cell(c)
        ]
        from autograder.sandbox import INNER_REFERENCE, SandboxedKernelManager

        sandboxed = self.config.Execute.get("kernel_manager_class") is SandboxedKernelManager
        config = {
            "nonce": nonce,
            "tests": tests,
            "reference": list(REFERENCE_PACKAGES),
            "reference_dirs": _reference_dirs(sandboxed),
            "reference_path": INNER_REFERENCE if sandboxed else None,
            "grader_cells": [_sha256(_report_source(nonce))],
        }
        setup = new_code_cell(_setup_source(config), metadata={PROBE_KEY: "setup"})
        report = new_code_cell(_report_source(nonce), metadata={PROBE_KEY: "report"})
        nb.cells = [setup, *nb.cells, report]
        resources.setdefault(METADATA_KEY, {})["nonce"] = nonce
        return nb, resources


class CollectProbes(NbGraderPreprocessor):
    """Read the monitor's report and the sandbox's evidence; remove the grader cells.

    When the flags show tampering (:func:`forfeits`), every test cell gets an
    ``IntegrityError`` output first, so it scores zero in the gradebook, the CSVs and the
    feedback alike, with the reason.  ``c.CollectProbes.forfeit = False`` only flags.
    """

    before_execute = False
    forfeit = Bool(
        True, help="Score every test cell zero when tampering is detected (else only flag)."
    ).tag(config=True)

    def preprocess(self, nb, resources):
        nonce = resources.get(METADATA_KEY, {}).get("nonce")
        setup = [c for c in nb.cells if c.get("metadata", {}).get(PROBE_KEY) == "setup"]
        report = [c for c in nb.cells if c.get("metadata", {}).get(PROBE_KEY) == "report"]
        nb.cells = [c for c in nb.cells if PROBE_KEY not in c.get("metadata", {})]
        from autograder import sandbox

        path = resources.get("metadata", {}).get("path") or ""
        evidence = sandbox.evidence_for(path) if path else None
        result = collect(
            nb, setup[0] if setup else None, report[0] if report else None, nonce, evidence
        )
        static = static_flags(nb)
        result["static_flags"] = static
        flags = sorted(set(result["flags"]) | set(static))
        if self.forfeit and forfeits(flags):
            reasons = "; ".join(f"{f}: {describe(f)}" for f in flags if forfeits([f]))
            for cell in nb.cells:
                if _is_test_cell(cell):
                    cell.outputs.insert(
                        0,
                        new_output(
                            "error",
                            ename="IntegrityError",
                            evalue=f"not scored: the grader detected an attempt to change how "
                            f"it grades ({reasons})",
                            traceback=[f"IntegrityError: not scored ({reasons})"],
                        ),
                    )
            result["forfeited"] = True
        nb.metadata[METADATA_KEY] = result
        return nb, resources


def collect(
    nb: NotebookNode,
    setup: NotebookNode | None,
    report: NotebookNode | None,
    nonce: str | None,
    evidence: list[dict] | None,
) -> dict:
    """Turn the report cell's output and the sandbox's evidence into flags."""
    flags: set[str] = set()
    notes: list[str] = []
    data = None
    if setup is not None and any(o.get("output_type") == "error" for o in setup.outputs):
        err = next(o for o in setup.outputs if o.get("output_type") == "error")
        notes.append(f"monitor did not start: {err.get('ename')}: {err.get('evalue')}"[:300])
        flags.add("probe-missing")
    if report is not None:
        for out in report.get("outputs", []):
            if out.get("output_type") == "display_data" and PROBE_MIME in out.get("data", {}):
                data = out["data"][PROBE_MIME]
        if data is None:
            errors = [o for o in report.outputs if o.get("output_type") == "error"]
            ran = report.get("execution_count") is not None
            if ran and not errors:
                flags.add("tamper:probe-suppressed")
            else:
                flags.add("probe-missing")
                if errors:
                    notes.append(
                        f"report cell: {errors[0].get('ename')}: {errors[0].get('evalue')}"[:300]
                    )
        elif not isinstance(data, dict) or data.get("nonce") != nonce or not data.get("ok"):
            flags.add("tamper:probe-forged")
            data = None
    else:
        flags.add("probe-missing")

    records, keys = [], set()
    for record in list(evidence or []) + list((data or {}).get("records", [])):
        if not isinstance(record, dict):
            continue
        key = json.dumps(record, sort_keys=True, default=repr)
        if key not in keys:  # the pipe and the report carry the same records
            keys.add(key)
            records.append(record)
    for record in records:
        if record.get("kind") == "flag" and isinstance(record.get("flag"), str):
            flag = record["flag"]
            if flag in REASONS:
                flags.add(flag)

    # Every test cell the notebook shows as run must have been seen, compiled from its
    # true source and executed (from the pipe when sandboxed, else from the report).
    if evidence is not None or data is not None:
        seen = {r.get("test") for r in records if r.get("kind") == "test-start"}
        seen |= set((data or {}).get("seen", []))
        executed = {r.get("test") for r in records if r.get("kind") == "test-executed"}
        executed |= set((data or {}).get("executed", []))
        for cell in nb.cells:
            if not _is_test_cell(cell) or cell.get("execution_count") is None:
                continue
            if any(
                o.get("ename") in ("NotExecuted", "CellTimeoutError", "KernelDied")
                for o in cell.get("outputs", [])
            ):
                continue
            grade_id = cell.metadata["nbgrader"].get("grade_id")
            if grade_id not in seen:
                flags.add("tamper:monitor-bypassed")
                notes.append(f"{grade_id}: not seen by the monitor")
            elif grade_id not in executed:
                flags.add("tamper:test-not-run")
                notes.append(f"{grade_id}: its code never executed")
    shown = [r for r in records if r.get("kind") in ("flag", "monitor-error")]
    return {
        "flags": sorted(flags),
        "notes": notes,
        "records": shown[:100],
        "sandboxed": evidence is not None,
    }


def _reference_dirs(sandboxed: bool) -> list[str]:
    """Where the kernel may find the reference package (its files' directories).

    The grader's own copy is listed even for a sandboxed kernel (it cannot see it there).
    """
    import importlib.util

    from autograder.sandbox import INNER_REFERENCE

    dirs = [f"{INNER_REFERENCE}/{name}" for name in REFERENCE_PACKAGES] if sandboxed else []
    for name in REFERENCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return dirs


# ---------------------------------------------------------------------------------------
# Reading the flags back
# ---------------------------------------------------------------------------------------


def runtime_flags(nb: NotebookNode, resources: dict | None = None) -> list[str]:
    """Flags from the executed notebook (written there by ``CollectProbes``).

    A notebook without the integrity metadata was not monitored: ``probe-missing``.
    """
    result = nb.get("metadata", {}).get(METADATA_KEY)
    if not isinstance(result, dict):
        return ["probe-missing"]
    return [f for f in result.get("flags", []) if isinstance(f, str)]


def cell_flags(nb: NotebookNode) -> dict[str, list[str]]:
    """Runtime flags by the test cell (grade_id) before which they were seen."""
    result = nb.get("metadata", {}).get(METADATA_KEY) or {}
    out: dict[str, list[str]] = {}
    for record in result.get("records", []):
        if record.get("kind") == "flag" and record.get("test"):
            out.setdefault(record["test"], [])
            if record["flag"] not in out[record["test"]]:
                out[record["test"]].append(record["flag"])
    return out


# ---------------------------------------------------------------------------------------
# Static scan of the learner's cells
# ---------------------------------------------------------------------------------------

_WATCHED = {"numpy": "numpy", "math": "math", "builtins": "builtins", "operator": "operator"}
_IPYTHON_TAMPER_ATTRS = {
    "input_transformers_cleanup": "tamper:input-transformer",
    "input_transformers_post": "tamper:input-transformer",
    "input_transformer_manager": "tamper:input-transformer",
    "ast_transformers": "tamper:ast-transformer",
    "set_custom_exc": "tamper:custom-exception-handler",
    "custom_exceptions": "tamper:custom-exception-handler",
    "showtraceback": "tamper:kernel-patched",
    "_showtraceback": "tamper:kernel-patched",
    "showsyntaxerror": "tamper:kernel-patched",
    "InteractiveTB": "tamper:kernel-patched",
    "run_ast_nodes": "tamper:kernel-patched",
    "run_cell_async": "tamper:kernel-patched",
    "transform_cell": "tamper:kernel-patched",
}
_SHELL_BENIGN = {"run_line_magic", "run_cell_magic", "magic", "system", "getoutput"}
_BUILTIN_NAMES = {
    "abs",
    "all",
    "any",
    "bool",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "getattr",
    "hasattr",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "pow",
    "print",
    "range",
    "repr",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
    "type",
    "zip",
    "AssertionError",
    "Exception",
    "BaseException",
    "TypeError",
    "ValueError",
}
_FAKE_OUTPUT = re.compile(r"(tests? passed|all tests|\bpassed\b|✓|✔|100\s*%|full marks)", re.I)
_COURSE_PATHS = re.compile(
    r"(gradebook\.db|(^|/)(source|release|submitted|autograded|reports)/"
    r"|nbgrader_config|\.\./\.\.)"
)


def static_flags(nb: NotebookNode) -> list[str]:
    """Flags for suspicious code in the learner-editable cells of a submitted notebook.

    Test cells (locked ``grade`` cells) are skipped: nbgrader restores their source
    before grading.  Cells that do not parse are scanned as text.
    """
    scanner = _Scanner()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and meta.get("locked") and not meta.get("solution"):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        scanner.scan(source)
    return sorted(scanner.flags)


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.flags: set[str] = set()
        self.modules: dict[str, str] = {}  # local name -> module (or module.attr) it is
        self.shells: set[str] = set()  # names bound to get_ipython()
        self.top_level = True

    # -- entry ----------------------------------------------------------------------------
    def scan(self, source: str) -> None:
        if re.search(r"^\s*!", source, re.M):
            self.flags.add("suspect:subprocess")
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            code = TransformerManager().transform_cell(source)
            tree = ast.parse(code)
        except Exception:  # not Python: look at the words
            self._scan_text(source)
            return
        self.visit(tree)

    def _scan_text(self, source: str) -> None:
        for word, flag in _IPYTHON_TAMPER_ATTRS.items():
            if word in source:
                self.flags.add(flag)
        if any(r in source for r in REFERENCE_PACKAGES):
            self.flags.add("uses-reference")
        if "os._exit" in source:
            self.flags.add("suspect:exit")

    # -- helpers --------------------------------------------------------------------------
    def _root(self, node: ast.AST) -> tuple[str | None, list[str]]:
        """(module the chain starts from, attribute names) for ``np.testing.x``."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return self.modules[node.id], attrs
            if node.id == "__builtins__":
                return "builtins", attrs
            if node.id in self.shells:
                return "<shell>", attrs
        if isinstance(node, ast.Call) and self._is_get_ipython(node):
            return "<shell>", attrs
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("vars", "globals")
        ):
            if node.func.id == "vars" and node.args:
                module, _ = self._root(node.args[0])
                return module, ["__dict__", *attrs]
        return None, attrs

    def _is_get_ipython(self, node: ast.Call) -> bool:
        func = node.func
        return (isinstance(func, ast.Name) and func.id == "get_ipython") or (
            isinstance(func, ast.Attribute) and func.attr == "get_ipython"
        )

    def _patch(self, target: ast.AST) -> None:
        """Record an assignment to (or deletion of) ``target``."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._patch(elt)
            return
        if isinstance(target, ast.Starred):
            self._patch(target.value)
            return
        if isinstance(target, ast.Subscript):
            module, attrs = self._root(target.value)
            if module is not None and (not attrs or attrs[-1] == "__dict__"):
                self._module_patched(module, attrs)
            elif module == "sys" and attrs[:1] == ["modules"]:
                self.flags.add("tamper:import-hook")
            return
        if isinstance(target, ast.Attribute):
            if target.attr in (
                "__code__",
                "__globals__",
                "__closure__",
                "__defaults__",
                "__kwdefaults__",
            ):
                self.flags.add("suspect:code-patch")
            module, attrs = self._root(target)
            if module is not None:
                self._module_patched(module, attrs)
            return
        if isinstance(target, ast.Name):
            if target.id == "__builtins__":
                self.flags.add("tamper:monkeypatch-builtins")
            elif target.id in _BUILTIN_NAMES and self.top_level:
                self.flags.add("suspect:shadows-builtin")

    def _module_patched(self, module: str, attrs: list[str]) -> None:
        root = module.split(".")[0]
        if module == "<shell>":
            flag = next(
                (_IPYTHON_TAMPER_ATTRS[a] for a in attrs if a in _IPYTHON_TAMPER_ATTRS),
                "tamper:kernel-patched",
            )
            self.flags.add(flag)
        elif root in _WATCHED:
            self.flags.add(f"tamper:monkeypatch-{_WATCHED[root]}")
        elif root in REFERENCE_PACKAGES:
            self.flags.add("tamper:patched-reference")
        elif root == "sys":
            first = attrs[0] if attrs else ""
            if first in ("stdout", "stderr", "__stdout__", "__stderr__"):
                self.flags.add("suspect:stream-redirect")
            elif first in ("meta_path", "path_hooks", "modules", "path_importer_cache"):
                self.flags.add("tamper:import-hook")
            elif first == "path":
                self.flags.add("suspect:sys-path")
            elif first in ("excepthook", "displayhook", "settrace", "setprofile"):
                self.flags.add("tamper:kernel-patched")
        elif root in ("IPython", "ipykernel", "traitlets"):
            self.flags.add("tamper:kernel-patched")

    def _import(self, module: str) -> None:
        root = module.split(".")[0]
        if root in REFERENCE_PACKAGES:
            self.flags.add("uses-reference")
        elif root in ("ctypes", "gc", "inspect"):
            self.flags.add("suspect:introspection")
        elif root == "importlib":
            self.flags.add("suspect:dynamic-import")
        elif root in ("socket", "urllib", "http", "requests", "ssl", "asyncio.streams"):
            self.flags.add("suspect:network")
        elif root in ("subprocess", "multiprocessing", "pty"):
            self.flags.add("suspect:subprocess")
        elif root == "signal":
            self.flags.add("suspect:signal")
        elif root == "ipykernel" or module.startswith("IPython.core"):
            self.flags.add("suspect:ipython-internals")
        elif root in ("unittest", "mock"):
            self.flags.add("suspect:code-patch")

    # -- visitors ---------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias.name)
            if alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            return
        self._import(module)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._import(full)
            self.modules[alias.asname or alias.name] = full
            if alias.name == "get_ipython":
                self.modules.pop(alias.asname or alias.name, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._patch(target)
        if isinstance(node.value, ast.Call) and self._is_get_ipython(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.shells.add(target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._patch(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._patch(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._patch(target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.top_level and node.name in _BUILTIN_NAMES:
            self.flags.add("suspect:shadows-builtin")
        top, self.top_level = self.top_level, False
        self.generic_visit(node)
        self.top_level = top

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.top_level and node.name in _BUILTIN_NAMES:
            self.flags.add("suspect:shadows-builtin")
        top, self.top_level = self.top_level, False
        self.generic_visit(node)
        self.top_level = top

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _IPYTHON_TAMPER_ATTRS:
            self.flags.add(_IPYTHON_TAMPER_ATTRS[node.attr])
        module, attrs = self._root(node)
        if module == "<shell>" and attrs:
            if attrs[0] == "events":
                self.flags.add("tamper:event-callback")
            elif attrs[0] in ("system", "getoutput"):
                self.flags.add("suspect:subprocess")
            elif attrs[0] not in _SHELL_BENIGN and attrs[0] not in _IPYTHON_TAMPER_ATTRS:
                self.flags.add("suspect:ipython-internals")
        elif module == "sys" and attrs[:1] == ["modules"]:
            self.flags.add("suspect:dynamic-import")
        elif module == "sys" and attrs[:1] == ["_getframe"]:
            self.flags.add("suspect:introspection")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REFERENCE_PACKAGES:
            self.flags.add("uses-reference")
        elif node.id in ("__import__",):
            self.flags.add("suspect:dynamic-import")
        elif node.id in ("exec", "eval", "compile") and isinstance(node.ctx, ast.Load):
            self.flags.add("suspect:dynamic-code")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            text = node.value
            if any(
                text == r or text.startswith(r + ".") or f"{r}/" in text for r in REFERENCE_PACKAGES
            ):
                self.flags.add("uses-reference")
            if _COURSE_PATHS.search(text):
                self.flags.add("suspect:course-files")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        module, attrs = self._root(func) if isinstance(func, ast.Attribute) else (None, [])
        dotted = ".".join([module or "", *attrs]) if module else ""
        name = func.id if isinstance(func, ast.Name) else None
        if name in ("setattr", "delattr") and node.args:
            target_module, target_attrs = self._root(node.args[0])
            if target_module is not None:
                self._module_patched(target_module, [*target_attrs, "?"])
        elif name in ("exit", "quit"):
            self.flags.add("suspect:exit")
        elif name == "print":
            for arg in node.args:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        if _FAKE_OUTPUT.search(sub.value):
                            self.flags.add("suspect:fake-test-output")
        elif name == "open" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if first.value.startswith("/") or ".." in first.value:
                    self.flags.add("suspect:course-files")
        if dotted in ("os._exit", "os.kill", "os.abort", "os.killpg", "posix._exit", "sys.exit"):
            self.flags.add("suspect:exit")
        elif dotted in (
            "sys.settrace",
            "sys.setprofile",
            "threading.settrace",
            "threading.setprofile",
            "threading.settrace_all_threads",
        ):
            self.flags.add("tamper:trace")
        elif dotted.startswith("signal."):
            self.flags.add("suspect:signal")
        elif dotted in (
            "os.system",
            "os.popen",
            "os.fork",
            "os.forkpty",
            "os.spawnl",
            "os.spawnv",
            "os.execv",
            "os.execl",
            "os.posix_spawn",
            "pty.fork",
        ):
            self.flags.add("suspect:subprocess")
        elif dotted.startswith(("importlib.", "sys.modules")):
            self.flags.add("suspect:dynamic-import")
        elif dotted.startswith(("gc.", "ctypes.", "inspect.")):
            self.flags.add("suspect:introspection")
        elif dotted.startswith("sys.path.") and attrs[-1] in ("insert", "append", "extend"):
            self.flags.add("suspect:sys-path")
        elif dotted.startswith("sys.meta_path.") or dotted.startswith("sys.path_hooks."):
            self.flags.add("tamper:import-hook")
        elif module == "<shell>" and attrs and attrs[0] in ("register_magic_function",):
            self.flags.add("suspect:ipython-internals")
        if (
            module is not None
            and attrs
            and attrs[-1] in ("append", "insert", "extend", "register", "__setitem__")
        ):
            # get_ipython().input_transformers_cleanup.append(...) and the like
            self._module_patched(module, attrs[:-1]) if module == "<shell>" else None
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        name = (
            exc.func.id
            if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)
            else (exc.id if isinstance(exc, ast.Name) else None)
        )
        if name in ("SystemExit", "KeyboardInterrupt"):
            self.flags.add("suspect:exit")
        self.generic_visit(node)


__all__ = [
    "CollectProbes",
    "InsertProbes",
    "REASONS",
    "cell_flags",
    "describe",
    "forfeits",
    "preprocessors",
    "runtime_flags",
    "static_flags",
]
