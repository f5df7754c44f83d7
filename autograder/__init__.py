"""The instructor's tool for the chapter E7 course: release, grade, feedback, report, demo.

Each verb lives in its own module (``release.py``, ``grade.py``, ``feedback.py``,
``report.py``, ``demo.py``, ``lab.py``); ``cli.py`` only parses arguments and calls them.
The folders are the grading pipeline, in order: ``intake/`` (submissions in), ``grading/``
(one job per submission, on a worker pool), ``preprocessors/`` (nbgrader's steps around
execution), ``sandbox/`` (where the kernel runs), ``integrity/`` (tamper detection) and
``render/`` (feedback pages and the report).  ``tests/test_lint.py`` keeps the imports
pointing down that list.
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
# "iri" formats, and that module compiles some 35 Lark parsers at import: about 1.8 s in
# every process that reads a notebook (python-jsonschema/jsonschema#1428).  No notebook or
# nbgrader schema uses those formats; jsonschema skips them when the import fails.
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)
