#!/usr/bin/env bash
# Creates (or completes) the Python venv used by scripts/capture/: xprof 2.24.2 + jax[cpu] 0.10.2.
#   scripts/capture/install_xprof_venv.sh            # venv at /work/.venv-jax
#   VENV=/some/dir PYTHON=python3.11 scripts/capture/install_xprof_venv.sh
# Idempotent: an existing venv is reused and pip only installs what is missing.
# Needs network access to PyPI. Tested with Python 3.11.7.
set -euo pipefail
VENV="${VENV:-/work/.venv-jax}"
PYTHON="${PYTHON:-python3}"
XPROF_VERSION="2.24.2"
JAX_VERSION="0.10.2"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "xprof==$XPROF_VERSION" "jax[cpu]==$JAX_VERSION"

# Smoke checks: the CLI starts, and jax sees the CPU backend.
(cd /tmp && "$VENV/bin/xprof" --help >/dev/null 2>&1) || { echo "xprof --help failed" >&2; exit 1; }
"$VENV/bin/python" -c "import jax, importlib.metadata as m; print('jax', jax.__version__, '| xprof', m.version('xprof'), '|', jax.devices())"
