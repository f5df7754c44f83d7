"""The instructor's tool for the chapter E7 course: release, grade, feedback, report, demo.

Each verb lives in its own module (``release.py``, ``grade.py``, ``feedback.py``,
``report.py``, ``export.py``, ``demo.py``, ``lab.py``, and the package ``handout/``, the
learner's kit); ``cli.py`` only parses arguments
and calls them, ``entry.py`` is the command's entry point (it starts the worker pool's
forkserver before anything else is imported) and ``__main__.py`` runs it as
``python -m autograder``.  Beside them: ``course.py`` (the nbgrader course directory and
its configuration), ``cells.py`` (what nbgrader's metadata says about one cell),
``demonstrations.py`` (the cells the grader skips, by the source's marks),
``files.py`` (writing a file whole or not at all) and ``cluster.py`` (the Dask worker
preload).

The folders are the grading pipeline, in order: ``intake/`` (submissions in), ``grading/``
(one job per submission, on a worker pool), ``preprocessors/`` (nbgrader's steps around
execution), ``sandbox/`` (where the kernel runs), ``integrity/`` (tamper detection) and
``render/`` (feedback pages and the report).  Their import layers differ from that order:
lowest first, ``integrity/``, ``sandbox/``, ``preprocessors/``, ``intake/``, ``grading/``,
``render/``, then the verbs; a module imports only from its own layer or a lower one, and
``tests/test_lint.py`` enforces it.
"""

__version__ = "0.1.0"

import os as _os
import sys as _sys

# nbgrader's Gradebook runs the `alembic` command when it creates a database, and
# Jupyter finds kernels and tools on PATH: make this environment's bin/ visible even
# when the tool is started by full path (.venv/bin/specdec-course) without activation.
_bin = _os.path.dirname(_sys.executable)
if _bin not in _os.environ.get("PATH", "").split(_os.pathsep):
    _os.environ["PATH"] = _bin + _os.pathsep + _os.environ.get("PATH", "")

# jsonschema (under nbformat and nbgrader) imports rfc3987_syntax, when installed, for the
# "iri" formats, and that module compiles some 35 Lark parsers at import, in every process
# that reads a notebook (python-jsonschema/jsonschema#1428).  No notebook or
# nbgrader schema uses those formats; jsonschema skips them when the import fails.
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)
