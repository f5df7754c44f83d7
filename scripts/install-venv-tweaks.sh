#!/usr/bin/env bash
# Put scripts/skip-rfc3987-syntax.pth into the virtual environment's site-packages.
#
# jsonschema, which nbformat, nbgrader and Jupyter's servers import, imports rfc3987_syntax
# when it is installed (jupyter-events' "format-nongpl" extra installs it), and that module
# compiles its Lark grammars at import: 1.8 to 3.4 s in every such process on a 2-core
# machine (python-jsonschema/jsonschema#1428).  The .pth line makes that import fail, so
# jsonschema leaves out its "iri" format checks, which no notebook, nbgrader or Jupyter
# schema uses.  specdec-course's own processes do the same in autograder/__init__.py; this
# file extends it to the nbgrader and jupyter commands of the course's environment.
set -euo pipefail
python="$1"
here="$(cd "$(dirname "$0")" && pwd)"
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cp "$here/skip-rfc3987-syntax.pth" "$site/skip-rfc3987-syntax.pth"
