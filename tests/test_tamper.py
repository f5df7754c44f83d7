"""Tamper detection, and the adversarial corpus graded end to end.

* ``static_flags`` on tables of learner code, and on every legitimate sample submission
  (no false alarms);
* the in-kernel monitor (``autograder/integrity/monitor.py``) on small notebooks run with
  nbclient, in the sandbox and without it;
* ``tests/files/adversarial``: hostile E7.2 submissions graded by ``grade()`` in the
  sandbox, each against its expected status, score bounds and flags.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from support.course import FILES, REPO, lesson_preload, sandbox_available
from traitlets.config import Config

from autograder import integrity, sandbox
from autograder.preprocessors import CollectProbes, InsertProbes

ADVERSARIAL = FILES / "adversarial"
ASSIGNMENT = "e7_2_acceptance_tests"
SAMPLES = FILES / ASSIGNMENT / "submissions"


# ---------------------------------------------------------------------------------------
# Static scan
# ---------------------------------------------------------------------------------------

STATIC_CASES = [
    (
        "get_ipython().input_transformers_cleanup.append(lambda lines: [])",
        "tamper:input-transformer",
    ),
    ("ip = get_ipython()\nip.input_transformers_post.insert(0, f)", "tamper:input-transformer"),
    ("get_ipython().ast_transformers.append(T())", "tamper:ast-transformer"),
    ("get_ipython().events.register('post_run_cell', cb)", "tamper:event-callback"),
    ("get_ipython().set_custom_exc((Exception,), h)", "tamper:custom-exception-handler"),
    ("shell = get_ipython()\nshell.showtraceback = lambda *a: None", "tamper:kernel-patched"),
    ("import numpy as np\nnp.isclose = lambda *a, **k: True", "tamper:monkeypatch-numpy"),
    ("import numpy\nnumpy.testing.assert_allclose = print", "tamper:monkeypatch-numpy"),
    ("import numpy as np\nsetattr(np, 'allclose', f)", "tamper:monkeypatch-numpy"),
    ("import math as m\nm.isclose = f", "tamper:monkeypatch-math"),
    ("import builtins\nbuiltins.abs = lambda x: 0", "tamper:monkeypatch-builtins"),
    ("__builtins__.float = int", "tamper:monkeypatch-builtins"),
    ("import sys\nsys.settrace(tracer)", "tamper:trace"),
    ("import sys\nsys.meta_path.insert(0, Finder())", "tamper:import-hook"),
    ("import specdec_reference", "uses-reference"),
    ("from specdec_reference.testing import check_close", "uses-reference"),
    ("m = __import__('specdec_reference')", "uses-reference"),
    ("import os\nos._exit(0)", "suspect:exit"),
    ("import sys\nsys.exit()", "suspect:exit"),
    ("raise SystemExit", "suspect:exit"),
    ("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)", "suspect:signal"),
    ("exec('x = 1')", "suspect:dynamic-code"),
    ("import importlib\nimportlib.import_module(name)", "suspect:dynamic-import"),
    ("import sys\nmod = sys.modules[name]", "suspect:dynamic-import"),
    ("import gc\ngc.get_objects()", "suspect:introspection"),
    ("def abs(x):\n    return 0", "suspect:shadows-builtin"),
    ("abs = lambda x: 0", "suspect:shadows-builtin"),
    ("f.__code__ = g.__code__", "suspect:code-patch"),
    ("print('All tests passed!')", "suspect:fake-test-output"),
    ("open('../../../source/e7/lesson.ipynb').read()", "suspect:course-files"),
    ("import subprocess\nsubprocess.run(['ls'])", "suspect:subprocess"),
    ("!ls ..", "suspect:subprocess"),
    ("import socket", "suspect:network"),
    ("import sys\nsys.stdout = open('/dev/null', 'w')", "suspect:stream-redirect"),
]


def learner_nb(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            s,
            metadata={
                "nbgrader": {"grade": False, "solution": True, "locked": False, "grade_id": f"s{i}"}
            },
        )
        for i, s in enumerate(sources)
    ]
    return nb


@pytest.mark.parametrize(("source", "flag"), STATIC_CASES)
def test_static_scan_flags_each_trick(source, flag):
    assert flag in integrity.static_flags(learner_nb(source))


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\n\ndef accept_prob(p, q):\n    return min(1.0, p / q)",
        "from math import isclose\nassert isclose(0.1 + 0.2, 0.3)",
        "%matplotlib inline\nimport matplotlib.pyplot as plt",
        "from IPython.display import display, Markdown\ndisplay(Markdown('hi'))",
        "x = np.minimum(p, q).sum()\nprint(f'acceptance {x:.3f}')",
        "import warnings\nwarnings.warn('careful')",
        "from numpy import *\nx = abs(-1.5)",
        "rng = np.random.default_rng(0)\ntoken = rng.choice(3, p=[0.2, 0.3, 0.5])",
    ],
)
def test_static_scan_ignores_ordinary_code(source):
    assert integrity.static_flags(learner_nb(source)) == []


def test_static_scan_skips_locked_test_cells():
    nb = learner_nb("x = 1")
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import specdec_reference",
            metadata={
                "nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t"}
            },
        )
    )
    assert integrity.static_flags(nb) == []


def test_static_scan_reads_cells_that_do_not_parse():
    assert "tamper:input-transformer" in integrity.static_flags(
        learner_nb("def broken(:\nget_ipython().input_transformers_cleanup.append(f)")
    )


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.ipynb")), ids=lambda p: p.stem)
def test_legitimate_samples_raise_no_tamper_flag(path):
    flags = integrity.static_flags(nbformat.read(path, as_version=4))
    if path.stem == "mistake-imports-reference":
        assert "uses-reference" in flags
    else:
        assert not integrity.forfeits(flags), flags


def test_every_flag_has_a_reason_and_forfeiture_follows_the_prefix():
    for flag, reason in integrity.REASONS.items():
        assert reason and integrity.describe(flag) == reason
        assert integrity.forfeits([flag]) == (
            flag.startswith("tamper:") or flag == "uses-reference"
        )
    assert not integrity.forfeits(["suspect:exit", "probe-missing"])


def test_runtime_flags_of_an_unmonitored_notebook_say_so():
    assert integrity.runtime_flags(nbformat.v4.new_notebook(), {}) == ["probe-missing"]


def test_a_submission_cannot_bring_its_own_verdict():
    nb = learner_nb("x = 1")
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "assert x == 1  # hidden",
            metadata={
                "nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t"}
            },
        )
    )
    nb.metadata[integrity.METADATA_KEY] = {"flags": []}
    nb.cells.append(nbformat.v4.new_code_cell("", metadata={integrity.PROBE_KEY: "report"}))
    nb, _ = InsertProbes(config=Config()).preprocess(nb, {})
    assert integrity.METADATA_KEY not in nb.metadata
    assert [c.metadata.get(integrity.PROBE_KEY) for c in nb.cells] == [
        "setup",
        None,
        None,
        "report",
    ]
    # The monitor cell knows the tests by hash only: their (hidden) source is not in it.
    assert "assert x" not in nb.cells[0].source
    # The hidden tests' guard scans every executed cell for the reference: not this one.
    from specdec_reference.testing.guard import _learner_cells_using_reference

    assert _learner_cells_using_reference([c.source for c in nb.cells]) == []


# ---------------------------------------------------------------------------------------
# The monitor inside the kernel
# ---------------------------------------------------------------------------------------

TEST_A = (
    '"""Check accept_prob."""\n'
    "assert abs(accept_prob(0.5, 0.8) - 0.625) <= 1e-9, accept_prob(0.5, 0.8)\n"
)
TEST_B = (
    '"""Check accept_prob against the reference."""\n'
    "import specdec_reference as _ref\n"
    "assert abs(float(accept_prob(0.2, 0.1)) - float(_ref.accept_prob(0.2, 0.1))) <= 1e-9\n"
)
RIGHT = "def accept_prob(p, q):\n    return min(1.0, p / q)\n"
WRONG = "def accept_prob(p, q):\n    return 0.0\n"


def graded_nb(learner: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            learner,
            metadata={"nbgrader": {"grade": False, "solution": True, "grade_id": "accept_prob"}},
        ),
        *[
            nbformat.v4.new_code_cell(
                src,
                metadata={
                    "nbgrader": {
                        "grade": True,
                        "solution": False,
                        "locked": True,
                        "grade_id": gid,
                        "points": 1,
                    }
                },
            )
            for gid, src in (("test_a", TEST_A), ("test_b", TEST_B))
        ],
    ]
    return nb


def cells_nb(*cells: tuple[str, str, bool]) -> nbformat.NotebookNode:
    """A graded notebook of ``(grade_id, source, is_test)`` cells (tests worth 1 point)."""
    nb = nbformat.v4.new_notebook()
    for gid, src, test in cells:
        meta = {"grade": test, "solution": not test, "grade_id": gid}
        if test:
            meta.update(locked=True, points=1)
        nb.cells.append(nbformat.v4.new_code_cell(src, metadata={"nbgrader": meta}))
    return nb


def monitored_run(
    learner: str,
    tmp_path: Path,
    *,
    sandboxed: bool,
    warm: sandbox.WarmParents | None = None,
    nb: nbformat.NotebookNode | None = None,
) -> tuple[dict, list[str]]:
    """Run a 3-cell graded notebook between the integrity preprocessors; (errors, flags).

    Sandboxed with ``warm``, the kernel is forked from a warm parent (and must be).
    ``nb`` replaces the 3-cell notebook (``learner`` is then unused).
    """
    job = tmp_path / "job"
    nbdir = job / "nb"
    nbdir.mkdir(parents=True)
    config = Config()
    kw = {}
    if sandboxed:
        kernels = sandbox.configure(
            config, job_dir=job, limits=sandbox.Limits(), warm=warm, preload=lesson_preload()
        )
        kw = {
            "kernel_manager_class": sandbox.SandboxedKernelManager,
            "on_cell_execute": config.Execute.on_cell_execute,
        }
    resources = {"metadata": {"path": str(nbdir)}}
    nb = graded_nb(learner) if nb is None else nb
    nb, resources = InsertProbes(config=config).preprocess(nb, resources)
    client = NotebookClient(
        nb,
        config=config,
        kernel_name="python3",
        timeout=20,
        allow_errors=True,
        resources=resources,
        **kw,
    )
    try:
        client.execute()
        nb, _ = CollectProbes(config=config).preprocess(nb, resources)
    finally:
        if sandboxed:
            sandbox.kill_leftovers(job)
    if sandboxed:
        assert kernels.active().kernel_start == ("forked" if warm else "fresh")
    errors = {
        c.metadata["nbgrader"]["grade_id"]: [o.ename for o in c.outputs if o.output_type == "error"]
        for c in nb.cells
    }
    assert all(integrity.PROBE_KEY not in c.metadata for c in nb.cells)
    return errors, integrity.runtime_flags(nb, {})


MONITOR_CASES = [
    ("right", RIGHT, []),
    (
        "star-import-shadows-builtins-harmlessly",
        "from numpy import *\n\ndef accept_prob(p, q):\n    return minimum(1.0, p / q)\n",
        [],
    ),
    (
        "input-transformer",
        WRONG + "get_ipython().input_transformers_cleanup.append(lambda lines: [])",
        ["tamper:input-transformer", "tamper:test-altered"],
    ),
    (
        "selective-transformer",
        WRONG + "def _t(lines):\n    return [] if 'Check' in "
        "''.join(lines) else lines\nget_ipython().input_transformers_cleanup.append(_t)",
        ["tamper:input-transformer", "tamper:test-altered", "tamper:test-not-run"],
    ),
    (
        "numpy-and-builtins",
        "import numpy as np, builtins\n"
        + WRONG
        + "np.isclose = lambda *a, **k: True\nbuiltins.float = lambda x: 0.625",
        ["tamper:monkeypatch-numpy", "tamper:monkeypatch-builtins"],
    ),
    ("shadowed-abs", WRONG + "abs = lambda x: 0", ["tamper:shadowed-builtin"]),
    (
        "custom-exception-handler",
        WRONG + "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
        ["tamper:custom-exception-handler"],
    ),
    (
        "monitor-removed",
        WRONG + "ip = get_ipython()\nfor cb in list(ip.events.callbacks["
        "'pre_run_cell']):\n    ip.events.unregister('pre_run_cell', cb)",
        ["tamper:monitor-removed"],
    ),
    (
        "reference-at-call-time",
        "def accept_prob(p, q):\n    return __import__("
        "'_'.join(('specdec', 'reference'))).accept_prob(p, q)\n",
        ["uses-reference"],
    ),
]


@pytest.fixture(scope="module", params=["forked", "fresh"])
def warm(request):
    """Kernels forked from a warm parent (the default), or started fresh (--no-fork)."""
    holder = sandbox.WarmParents() if request.param == "forked" else None
    yield holder
    if holder is not None:
        holder.close()


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("name", "learner", "flags"), MONITOR_CASES, ids=[c[0] for c in MONITOR_CASES]
)
def test_monitor_flags_tampering_in_the_sandbox(name, learner, flags, tmp_path, warm):
    if not sandbox_available():
        pytest.skip(f"sandbox unavailable: {sandbox.sandbox_problem()}")
    errors, found = monitored_run(learner, tmp_path, sandboxed=True, warm=warm)
    assert set(flags) <= set(found), found
    if not flags:
        assert found == [] and errors == {"accept_prob": [], "test_a": [], "test_b": []}


HELPER_TEST = (
    '"""Check accept_prob, with a helper later test cells use."""\n'
    "def close(a, b):\n    return abs(float(a) - float(b)) <= 1e-9\n"
    "assert close(accept_prob(0.5, 0.8), 0.625)\n"
)
LATER_TEST = '"""Check accept_prob caps at 1."""\nassert close(accept_prob(0.2, 0.1), 1.0)\n'


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("later", "flags"),
    [
        ("close = lambda a, b: True", ["tamper:redefined-test-helper"]),
        ("def close(a, b):\n    return True", ["tamper:redefined-test-helper"]),
        ("closer = lambda a, b: True\nresult = close(1, 1)", []),
    ],
    ids=["lambda", "def", "untouched"],
)
def test_monitor_flags_a_learner_cell_that_rebinds_a_test_helper(later, flags, tmp_path, warm):
    """A test cell's function, read by a later test cell, rebound by learner code between."""
    nb = cells_nb(
        ("accept_prob", RIGHT, False),
        ("test_a", HELPER_TEST, True),
        ("later", later, False),
        ("test_b", LATER_TEST, True),
    )
    errors, found = monitored_run("", tmp_path, sandboxed=True, warm=warm, nb=nb)
    assert found == flags
    # tampering forfeits every test cell's score; otherwise both pass
    expected = ["IntegrityError"] if flags else []
    assert errors["test_a"] == errors["test_b"] == expected, errors


@pytest.mark.kernel
def test_monitor_works_without_the_sandbox(tmp_path):
    _, found = monitored_run(
        WRONG + "import numpy as np\nnp.allclose = print", tmp_path, sandboxed=False
    )
    assert "tamper:monkeypatch-numpy" in found
    _, clean = monitored_run(RIGHT, tmp_path / "again", sandboxed=False)
    assert clean == []


# ---------------------------------------------------------------------------------------
# The adversarial corpus, graded end to end
# ---------------------------------------------------------------------------------------

EXPECTED = json.loads((ADVERSARIAL / "expected.json").read_text())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, one_lesson_course):
    """Grade every adversarial submission once (sandboxed, 2 workers); return the results."""
    if not sandbox_available():
        pytest.skip(f"sandbox unavailable: {sandbox.sandbox_problem()}")
    from autograder.grade import Harness, grade

    tmp = tmp_path_factory.mktemp("adversarial")
    course = one_lesson_course(ASSIGNMENT, tmp / "course")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    subs = tmp / "submissions"
    subs.mkdir()
    for path in sorted((ADVERSARIAL / "submissions").glob("*.ipynb")):
        text = path.read_text().replace("__COURSE_ROOT__", str(course))
        (subs / path.name).write_text(text.replace("__LOOPBACK_PORT__", str(port)))
    try:
        result = grade(
            ASSIGNMENT,
            submissions=subs,
            course=course,
            workers=2,
            timeout=10,
            notebook_timeout=120,
            sandbox=True,
            harness=Harness(feedback=False),
        )
        try:
            accepted = [server.accept()]
        except OSError:
            accepted = []
    finally:
        server.close()
    yield {"course": course, "results": result.results, "accepted": accepted}
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.kernel
@pytest.mark.sandbox
def test_adversarial_corpus_ran_in_forked_kernels(corpus):
    """The corpus takes the default path: every kernel forked from a warm parent."""
    starts = {name: r.kernel for name, r in corpus["results"].items()}
    assert set(starts.values()) == {"forked"}, starts


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_adversarial_submission_gets_its_expected_outcome(corpus, scenario):
    expected = EXPECTED[scenario]
    result = corpus["results"][scenario]
    flags = result.flags
    summary = f"{scenario}: {result.status} {result.score} {flags} {result.reason!r}"
    if "status" in expected:
        assert result.status in expected["status"], summary
    if expected.get("score") == "baseline":
        # No better than the same wrong code without the trick, unless the grader
        # caught it (a forfeiting flag: the worker then scores it zero).
        baseline = corpus["results"]["wrong-baseline"].score
        assert result.score <= baseline or integrity.forfeits(flags), summary
    elif "score" in expected:
        low, high = expected["score"]
        assert low <= result.score <= high, summary
    for flag in expected.get("flags", []):
        assert flag in flags, summary
    for prefix in expected.get("no_flags", []):
        assert not [f for f in flags if f.startswith(prefix)], summary


@pytest.mark.kernel
@pytest.mark.sandbox
def test_adversarial_corpus_leaves_the_course_and_the_network_alone(corpus):
    course = corpus["course"]
    assert corpus["accepted"] == []
    assert not list(course.rglob("ADVERSARIAL_MARKER"))
    with sqlite3.connect(course / "gradebook.db") as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert "adversarial_marker" not in tables
    assert (course / "gradebook.db").read_bytes()[-5:] != b"pwned"


def test_corpus_is_up_to_date():
    """The committed corpus is what build_corpus.py makes from today's source and release.

    The committed release is today's: ``test_lessons.py`` checks it against the source."""
    release = REPO / "release" / ASSIGNMENT / "acceptance_tests.ipynb"
    sys.path.insert(0, str(ADVERSARIAL))
    try:
        import build_corpus
    finally:
        sys.path.remove(str(ADVERSARIAL))
    assert build_corpus.main(["--check", "--release", str(release)]) == 0
