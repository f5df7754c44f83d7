#!/usr/bin/env bash
# Install the Debian packages the course needs, only when something is missing:
#   bubblewrap  - the sandbox that learner kernels run in (specdec-course grade)
#   chromium-headless-shell - the Chromium that the JupyterLab tests drive through Playwright
#   postgresql  - the server the gradebook tests start (binaries in /usr/lib/postgresql/*/bin)
#   npm         - installs configurable-http-proxy, JupyterHub's proxy, into .venv for the
#                 hub tests (scripts/install-proxy.sh); it brings nodejs
#   python3-venv - Debian's python3 with venv and pip, which the environments are built on
#                 (scripts/venv-python.sh) and the hub test's learners' servers run on
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium-headless-shell >/dev/null 2>&1 || missing+=(chromium-headless-shell)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || missing+=(postgresql)
command -v npm >/dev/null 2>&1 || missing+=(npm)
fc-list 2>/dev/null | grep -qi dejavu || missing+=(fonts-dejavu-core)
/usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "error: need root (or sudo) to install: ${missing[*]}" >&2
    echo "       install them yourself, e.g.: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt run (an unattended upgrade, a second checkout's make) holds dpkg's lock for a
# while: wait for it rather than fail.
wait_for_lock=(-o DPkg::Lock::Timeout=600)
$SUDO apt-get "${wait_for_lock[@]}" update -qq
$SUDO apt-get "${wait_for_lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
