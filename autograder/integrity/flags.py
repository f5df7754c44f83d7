"""The flag vocabulary: every integrity flag, the reason behind it, and what it costs.

Flags are short strings.  ``tamper:*`` and ``uses-reference`` mean the grader saw an
attempt to change how it grades (:func:`forfeits` is true: ``CollectProbes`` then fails
every test cell with an ``IntegrityError`` that gives the reason, so the submission scores
zero); ``suspect:*`` and ``probe-missing`` are for the instructor to review and change no
score.  :func:`describe` gives the reason behind each flag; :func:`runtime_flags` and
:func:`cell_flags` read back what ``CollectProbes`` wrote into an executed notebook.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

from nbformat import NotebookNode

#: Notebook metadata key where the collected integrity result is written.
METADATA_KEY = "specdec_integrity"


#: Cell metadata key marking the grader's own cells (removed after execution).
PROBE_KEY = "specdec_probe"


#: MIME type of the monitor's report.
PROBE_MIME = "application/x-specdec-probe+json"


REFERENCE_PACKAGES = ("specdec_reference",)


#: Why each flag is raised; shown to the instructor next to the flag.
REASONS = MappingProxyType(
    {
        "tamper:input-transformer": "changed IPython's input transformers "
        "(can blank out later cells, the tests included)",
        "tamper:ast-transformer": "added an IPython AST transformer (can rewrite the tests' code)",
        "tamper:event-callback": "registered an IPython event callback from learner code",
        "tamper:custom-exception-handler": "installed a custom exception handler "
        "(hides test failures)",
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
        "tamper:import-hook": "changed Python's import machinery "
        "(meta path, path hooks, sys.modules)",
        "tamper:probe-suppressed": "the grader's last cell ran but produced no report",
        "tamper:probe-forged": "the integrity report did not come from the grader's monitor",
        "uses-reference": "learner code imports or reads the reference implementation",
        "probe-missing": "the grader's integrity report is missing (the kernel died, timed out "
        "or was stopped before the end)",
        "suspect:exit": "stops the kernel or the cell early "
        "(os._exit, os.kill, sys.exit, exit...); "
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
)


def describe(flag: str) -> str:
    """The reason behind ``flag``, for the instructor's report."""
    return REASONS.get(flag, flag)


def forfeits(flags: Iterable[str]) -> bool:
    """True when the flags show an attempt to fool the grader: the submission scores zero.

    ``suspect:*`` flags (code that could be innocent) and ``probe-missing`` (often a
    crash, already scored by the tests that did not run) do not forfeit.
    """
    return any(f.startswith("tamper:") or f == "uses-reference" for f in flags)


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
