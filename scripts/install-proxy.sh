#!/usr/bin/env bash
# Install configurable-http-proxy, JupyterHub's proxy (an npm package), into the virtual
# environment given as $1 when it is missing there: <venv>/bin/configurable-http-proxy,
# with its files in <venv>/lib/node_modules.  Nothing outside the environment is installed
# (npm keeps its download cache in ~/.npm).  The hub tests (tests/test_jupyterhub.py) use it.
set -euo pipefail
venv="${1:?usage: install-proxy.sh <virtual environment>}"
[ -x "$venv/bin/configurable-http-proxy" ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is missing; scripts/install-system-deps.sh installs it (apt-get install npm)" >&2
  exit 1
fi
prefix="$(cd "$venv" && pwd)"
echo "Installing configurable-http-proxy into $prefix"
npm install --global --prefix "$prefix" --no-fund --no-audit --loglevel=error \
  "configurable-http-proxy@^5"
"$prefix/bin/configurable-http-proxy" --version >/dev/null
