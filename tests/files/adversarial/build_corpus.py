"""Regenerate the adversarial corpus: hostile E7.2 submissions and their expected outcome.

Every scenario is a learner notebook built from the E7.2 release: the solution cells
filled with the reference solutions (``base="reference"``) or with a wrong
``accept_prob`` that returns the raw target probability (``base="wrong"``, the same
mistake as the sample ``mistake-raw-target-probability``), then changed:

* resource scenarios (loops, memory, processes, network, the course's files) put their
  code in the first solution cell, ``part1_answers``.  Most of them *report through
  their answers*: ``answer_1`` is right only when the sandbox stopped the attack, so a
  full score proves the sandbox held;
* tampering scenarios add one trick to the wrong code.  Each must be flagged, and
  score no more than ``wrong-baseline`` (the same wrong code without the trick);
* ``correct-prints-warnings`` is a correct solution that writes warnings: full marks.

``tests/test_tamper.py`` grades the corpus with ``autograder.grade.grade`` after
replacing two placeholders: ``__COURSE_ROOT__`` (the course's absolute path) and
``__LOOPBACK_PORT__`` (a port the test listens on).  ``expected.json`` holds, for
each scenario, the allowed statuses, score bounds and the flags it must (or must not)
carry.

Usage (from the repository root)::

    python tests/files/adversarial/build_corpus.py            # write
    python tests/files/adversarial/build_corpus.py --check    # exit 1 if stale
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests.ipynb"
SAMPLES = ROOT / "tests" / "files" / "sample_builder.py"  # every lesson's sample engine

# The score of the wrong code without any trick (see expected.json of the samples:
# mistake-raw-target-probability).  Tampering scenarios must not score more unless the
# grader forfeits them.
WRONG_ACCEPT_PROB = """
    if not q > 0:
        raise ValueError("q must be > 0")
    return p
    """

# Full marks and the wrong code's score, from the E7.2 samples' expected scores (the
# reference and mistake-raw-target-probability), so that a change of points moves them too.
# The written answer, "by hand" there, is left unanswered here: it waits for a grader and
# adds nothing to the score.
_SAMPLE_SCORES = json.loads((ROOT / "tests" / "files" / ASSIGNMENT / "expected.json").read_text())
FULL, WRONG = (
    float(sum(p for p in _SAMPLE_SCORES[s].values() if p != "by hand"))
    for s in ("reference", "mistake-raw-target-probability")
)

# Code that sets the part-1 answers right only when ``ok`` is true.
ANSWERS_IF_OK = """
    answer_1 = 0.25 if ok else 0.0
    answer_2 = 1.0 if ok else 0.0
    answer_3 = 0.6 if ok else 0.0
    """



def _join(*parts: str) -> str:
    """Concatenate code blocks written at different indentations."""
    return "\n".join(textwrap.dedent(part).strip("\n") for part in parts) + "\n"


#: scenario -> {"base": "reference" | "wrong", "bodies": {grade_id: body},
#:              "after": {grade_id: top-level code appended to that solution cell}}
SCENARIOS: dict[str, dict] = {
    # --- the baseline the tampering scenarios are compared with -------------------------
    "wrong-baseline": {"base": "wrong"},
    # --- resources and isolation ----------------------------------------------------------
    "loop-infinite": {
        "base": "reference",
        "after": {"part1_answers": "while True:  # interrupted at the cell timeout\n    pass"},
    },
    "loop-ignores-interrupts": {
        "base": "reference",
        "after": {"part1_answers": """
            import signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            while True:
                pass
            """},
    },
    "exit-os-exit": {
        "base": "reference",
        "after": {"part1_answers": "import os\nos._exit(0)"},
    },
    "memory-bomb": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            # At most 3 GiB even without a sandbox; the default limit is 2 GiB.
            chunks, ok = [], False
            try:
                for _ in range(12):
                    chunks.append(bytearray(256 * 1024**2))
            except MemoryError:
                ok = True
            del chunks
            """, ANSWERS_IF_OK)},
    },
    "many-processes": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            # At most 100 sleeping children even without a sandbox (limit: 64 processes).
            import os, time
            started, ok = 0, False
            try:
                for _ in range(100):
                    if os.fork() == 0:
                        time.sleep(20)
                        os._exit(0)
                    started += 1
            except OSError:
                ok = True
            """, ANSWERS_IF_OK)},
    },
    "network-loopback": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import socket
            PORT = int("__LOOPBACK_PORT__")
            ok = True
            for host in ("127.0.0.1", "localhost", "::1"):
                try:
                    socket.create_connection((host, PORT), timeout=2).close()
                    ok = False
                except OSError:
                    pass
            """, ANSWERS_IF_OK)},
    },
    "read-source-relative": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import os
            ok = True
            for depth in range(1, 10):
                up = "../" * depth
                for name in ("source/e7_2_acceptance_tests/acceptance_tests.ipynb",
                             "gradebook.db", "nbgrader_config.py"):
                    if os.path.exists(up + name):
                        ok = False
            """, ANSWERS_IF_OK)},
    },
    "read-source-absolute": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import os
            COURSE = "__COURSE_ROOT__"
            ok = True
            for name in ("source/e7_2_acceptance_tests/acceptance_tests.ipynb",
                         "gradebook.db", "nbgrader_config.py", "release", "submitted"):
                try:
                    with open(os.path.join(COURSE, name), "rb") as f:
                        f.read(100)
                    ok = False
                except OSError:
                    pass
                if os.path.exists(os.path.join(COURSE, name)):
                    ok = False
            """, ANSWERS_IF_OK)},
    },
    "write-course-root": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import os
            COURSE = "__COURSE_ROOT__"
            targets = [os.path.join(COURSE, "ADVERSARIAL_MARKER")]
            targets += ["../" * depth + "ADVERSARIAL_MARKER" for depth in range(1, 8)]
            ok = True
            for path in targets:
                try:
                    with open(path, "w") as f:
                        f.write("pwned")
                    if path.startswith("/"):
                        ok = False
                except OSError:
                    pass
            """, ANSWERS_IF_OK)},
    },
    "write-gradebook": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import os, sqlite3
            GRADEBOOK = os.path.join("__COURSE_ROOT__", "gradebook.db")
            ok = True
            try:
                db = sqlite3.connect(f"file:{GRADEBOOK}?mode=rw", uri=True)
                db.execute("CREATE TABLE adversarial_marker (x)")
                db.commit()
                ok = False
            except sqlite3.Error:
                pass
            try:
                with open(GRADEBOOK, "ab") as f:
                    f.write(b"pwned")
                ok = False
            except OSError:
                pass
            """, ANSWERS_IF_OK)},
    },
    "sandbox-is-on": {
        "base": "reference",
        "bodies": {"part1_answers": _join("""
            import os
            COURSE = "__COURSE_ROOT__"
            sees_course = os.path.exists(COURSE)
            sees_home = os.path.exists(os.path.expanduser("~root/.bashrc"))
            ok = not sees_course and not sees_home and os.getuid() != 0
            """, ANSWERS_IF_OK)},
    },
    # --- tampering, always with the wrong accept_prob ---------------------------------------
    "tamper-input-transformer": {
        "base": "wrong",
        "after": {"part1_answers":
                  "get_ipython().input_transformers_cleanup.append(lambda lines: [])"},
    },
    "tamper-ast-transformer": {
        "base": "wrong",
        "after": {"part1_answers": """
            import ast

            class _NoChecks(ast.NodeTransformer):
                def visit_Assert(self, node):
                    return ast.Pass()

                def visit_Raise(self, node):
                    return ast.Pass()

            get_ipython().ast_transformers.append(_NoChecks())
            """},
    },
    "tamper-monkeypatch-numpy": {
        "base": "wrong",
        "after": {"accept_prob": """
            np.isclose = lambda *args, **kwargs: True
            np.allclose = lambda *args, **kwargs: True
            np.testing.assert_allclose = lambda *args, **kwargs: None
            """},
    },
    "tamper-monkeypatch-math": {
        "base": "wrong",
        "after": {"accept_prob": """
            import math
            math.isclose = lambda *args, **kwargs: True
            math.isfinite = lambda x: True
            """},
    },
    "tamper-monkeypatch-builtins": {
        "base": "wrong",
        "after": {"accept_prob": """
            import builtins
            builtins.abs = lambda x: 0
            """},
    },
    "tamper-shadow-builtins": {
        "base": "wrong",
        "after": {"accept_prob": "abs = lambda x: 0\nfloat = lambda x: 0.625"},
    },
    "tamper-replace-check-helpers": {
        "base": "wrong",
        "after": {"accept_prob": """
            import sys
            # The part-1 tests have imported the check helpers: neuter them.  (The name is
            # built at run time so that the hidden tests' own guard does not see it.)
            _helpers = sys.modules["_".join(("specdec", "reference.testing"))]
            for _name in ("check_close", "check_equal", "reference_guard", "check_raises"):
                setattr(_helpers, _name, lambda *args, **kwargs: None)
            _helpers.call_or_fail = lambda fn, *args, call=None, **kwargs: 0.625
            """},
    },
    "tamper-redefine-test-helpers": {
        "base": "wrong",
        "after": {"accept_prob": """
            import types
            _checks = types.SimpleNamespace(
                reference_guard=lambda *a, **k: None, check_close=lambda *a, **k: None,
                call_or_fail=lambda fn, *a, **k: 0.625, describe_call=lambda *a, **k: "")
            _ref = _checks
            """},
    },
    "tamper-fake-reference-package": {
        "base": "wrong",
        "after": {"part1_answers": """
            import os
            _pkg = "_".join(("specdec", "reference"))
            os.makedirs(_pkg, exist_ok=True)
            with open(os.path.join(_pkg, "__init__.py"), "w") as f:
                f.write("def accept_prob(p, q):\\n    return p\\n")
            with open(os.path.join(_pkg, "testing.py"), "w") as f:
                f.write("def __getattr__(name):\\n    return lambda *a, **k: None\\n")
            """},
    },
    "tamper-reference-at-call-time": {
        "base": "reference",
        "bodies": {"accept_prob": """
            # Not the learner's code: the reference's, fetched when the tests call it.
            return __import__("_".join(("specdec", "reference"))).accept_prob(p, q)
            """},
    },
    "tamper-hide-errors": {
        "base": "wrong",
        "after": {"part1_answers": """
            _shell = get_ipython()
            _shell.showtraceback = lambda *args, **kwargs: None

            def _forget_errors(result):
                result.error_in_exec = None
                result.error_before_exec = None

            _shell.events.register("post_run_cell", _forget_errors)
            """},
    },
    "tamper-custom-exception-handler": {
        "base": "wrong",
        "after": {"part1_answers":
                  "get_ipython().set_custom_exc((Exception,), lambda *args, **kwargs: None)"},
    },
    "tamper-settrace": {
        "base": "wrong",
        "after": {"part1_answers": """
            import sys

            def _tracer(frame, event, arg):
                return None

            sys.settrace(_tracer)
            """},
    },
    "tamper-exit-early": {
        "base": "wrong",
        "after": {"accept_prob": "import os\nos._exit(0)"},
    },
    "tamper-sys-exit": {
        "base": "wrong",
        "after": {"accept_prob": "import sys\nsys.exit(0)"},
    },
    "tamper-fake-output": {
        "base": "wrong",
        "after": {"accept_prob": f'print("All tests passed \\u2713  {FULL:g}/{FULL:g} points")'},
    },
    # --- a correct solution that writes warnings: full marks ----------------------------------
    "correct-prints-warnings": {
        "base": "reference",
        "after": {
            "part1_answers": """
                import warnings
                import numpy as np
                warnings.warn("a friendly reminder, not an error")
                print(np.float64(1.0) / np.float64(0.0))  # RuntimeWarning: divide by zero
                """,
            "accept_prob": """
                import warnings
                warnings.warn("accept_prob was (re)defined")
                """,
        },
    },
}

TAMPER_BOUND = "baseline"  # no more than wrong-baseline's score, unless forfeited

#: scenario -> expected outcome.  "status": allowed statuses; "score": [min, max] or
#: "baseline" (at most the baseline's score); "flags": flags that must be present;
#: "no_flags": prefixes that must not appear.
EXPECTED: dict[str, dict] = {
    "wrong-baseline": {"status": ["graded"], "score": [WRONG, WRONG], "no_flags": ["tamper:"]},
    "loop-infinite": {"status": ["graded", "timeout"], "score": [FULL, FULL],
                      "no_flags": ["tamper:"]},
    "loop-ignores-interrupts": {"status": ["timeout", "failed"], "score": [0.0, 0.0]},
    "exit-os-exit": {"status": ["failed", "graded"], "score": [0.0, 0.0],
                     "flags": ["suspect:exit"]},
    "memory-bomb": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "many-processes": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "network-loopback": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "read-source-relative": {"status": ["graded"], "score": [FULL, FULL],
                             "no_flags": ["tamper:"]},
    "read-source-absolute": {"status": ["graded"], "score": [FULL, FULL],
                             "no_flags": ["tamper:"]},
    "write-course-root": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "write-gradebook": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "sandbox-is-on": {"status": ["graded"], "score": [FULL, FULL], "no_flags": ["tamper:"]},
    "tamper-input-transformer": {"score": TAMPER_BOUND, "flags": ["tamper:input-transformer"]},
    "tamper-ast-transformer": {"score": TAMPER_BOUND, "flags": ["tamper:ast-transformer"]},
    "tamper-monkeypatch-numpy": {"score": TAMPER_BOUND, "flags": ["tamper:monkeypatch-numpy"]},
    "tamper-monkeypatch-math": {"score": TAMPER_BOUND, "flags": ["tamper:monkeypatch-math"]},
    "tamper-monkeypatch-builtins": {"score": TAMPER_BOUND,
                                    "flags": ["tamper:monkeypatch-builtins"]},
    "tamper-shadow-builtins": {"score": TAMPER_BOUND, "flags": ["tamper:shadowed-builtin"]},
    "tamper-replace-check-helpers": {"score": TAMPER_BOUND,
                                     "flags": ["tamper:patched-reference"]},
    "tamper-redefine-test-helpers": {"score": TAMPER_BOUND},
    "tamper-fake-reference-package": {"score": TAMPER_BOUND,
                                      "flags": ["tamper:fake-reference"]},
    "tamper-reference-at-call-time": {"score": [0.0, 0.0], "flags": ["uses-reference"]},
    "tamper-hide-errors": {"score": TAMPER_BOUND, "flags": ["tamper:kernel-patched",
                                                            "tamper:event-callback"]},
    "tamper-custom-exception-handler": {"score": TAMPER_BOUND,
                                        "flags": ["tamper:custom-exception-handler"]},
    "tamper-settrace": {"score": TAMPER_BOUND, "flags": ["tamper:trace"]},
    "tamper-exit-early": {"score": TAMPER_BOUND, "flags": ["suspect:exit"]},
    "tamper-sys-exit": {"score": TAMPER_BOUND, "flags": ["suspect:exit"]},
    "tamper-fake-output": {"score": TAMPER_BOUND, "flags": ["suspect:fake-test-output"]},
    "correct-prints-warnings": {"status": ["graded"], "score": [FULL, FULL],
                                "no_flags": ["tamper:", "uses-reference"]},
}


def _samples_module():
    spec = importlib.util.spec_from_file_location("sample_builder", SAMPLES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> dict[str, str]:
    """Return {file name: text} for every scenario notebook and expected.json."""
    samples = _samples_module()
    reference = samples.reference_bodies(source)
    out = {}
    for name, scenario in SCENARIOS.items():
        bodies = dict(reference)
        if scenario["base"] == "wrong":
            bodies["accept_prob"] = WRONG_ACCEPT_PROB
        bodies.update(scenario.get("bodies", {}))
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("solution") or cell.cell_type != "code":
                continue
            grade_id = meta["grade_id"]
            cell.source = samples.fill(cell.source, bodies[grade_id], grade_id)
            extra = scenario.get("after", {}).get(grade_id)
            if extra:
                cell.source += "\n\n" + textwrap.dedent(extra).strip("\n")
        text = nbformat.writes(nb)
        out[f"{name}.ipynb"] = text if text.endswith("\n") else text + "\n"
    unknown = set(EXPECTED) ^ set(SCENARIOS)
    if unknown:
        raise SystemExit(f"scenarios without expectations (or the reverse): {sorted(unknown)}")
    out["expected.json"] = json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, default=ROOT / "release" / ASSIGNMENT / NOTEBOOK)
    parser.add_argument("--source", type=Path, default=ROOT / "source" / ASSIGNMENT / NOTEBOOK)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed corpus instead of writing it")
    args = parser.parse_args(argv)
    files = build(nbformat.read(args.release, as_version=4),
                  nbformat.read(args.source, as_version=4))
    folder = HERE / "submissions"
    if args.check:
        stale = [name for name, text in files.items()
                 if not (_path(folder, name)).exists()
                 or _path(folder, name).read_text(encoding="utf-8") != text]
        extra = sorted(p.name for p in folder.glob("*.ipynb") if p.name not in files)
        if stale or extra:
            print(f"stale: {stale}; unexpected: {extra}; run {Path(__file__).name}",
                  file=sys.stderr)
            return 1
        print(f"{len(files) - 1} adversarial submissions are up to date")
        return 0
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        _path(folder, name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files) - 1} adversarial submissions to {folder.relative_to(ROOT)}")
    return 0


def _path(folder: Path, name: str) -> Path:
    return HERE / name if name == "expected.json" else folder / name


if __name__ == "__main__":
    sys.exit(main())
