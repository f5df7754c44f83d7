"""``InsertProbes``: the grader's first and last cells, around the learner's notebook.

The first cell runs :mod:`autograder.integrity.monitor` in the kernel before any learner
code (it snapshots what the tests rely on and installs an audit hook); the last asks the
monitor for its report.  Runs right before ``Execute``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import secrets
from importlib import resources
from pathlib import Path

from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.cells import is_test_cell
from autograder.integrity.flags import METADATA_KEY, PROBE_KEY, REFERENCE_PACKAGES
from autograder.sandbox import INNER_REFERENCE, SandboxedKernelManager

#: The monitor's source, run in the kernel (never imported by the grader).
MONITOR_SOURCE = resources.files("autograder.integrity").joinpath("monitor.py").read_text()


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
            if is_test_cell(c)
        ]
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


def _reference_dirs(sandboxed: bool) -> list[str]:
    """Where the kernel may find the reference package (its files' directories).

    The grader's own copy is listed even for a sandboxed kernel (it cannot see it there).
    """
    dirs = [f"{INNER_REFERENCE}/{name}" for name in REFERENCE_PACKAGES] if sandboxed else []
    for name in REFERENCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return dirs
