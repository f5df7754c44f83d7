#!/bin/sh
# Print the Python that `make` builds .venv and .venv-learner from (`make PYTHON=...`
# chooses another).
#
# On Debian, that is Debian's own python3 when it is 3.10 or newer and can make a virtual
# environment with pip (python3-venv, which scripts/install-system-deps.sh installs).
# Debian's interpreter links libpython statically and is built with profile-guided
# optimization; a Python that pyenv builds with its defaults does neither, and grading a
# lesson's samples took about 13% more CPU on it (docs/performance.md).
# Anywhere else, or when Debian's is too old, it is the `python3` on PATH.
if [ -r /etc/debian_version ] && [ -x /usr/bin/python3 ] &&
  /usr/bin/python3 -c 'import ensurepip, sys; sys.exit(sys.version_info < (3, 10))' \
    >/dev/null 2>&1; then
  echo /usr/bin/python3
else
  echo python3
fi
