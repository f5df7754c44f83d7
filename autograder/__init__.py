"""The instructor's tool for the chapter E7 course: release, grade, feedback, report, demo.

Each verb lives in its own module (``release.py``, ``grade.py``, ``feedback.py``,
``report.py``, ``demo.py``); ``cli.py`` only parses arguments and calls them.
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
