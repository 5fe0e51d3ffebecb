#!/usr/bin/env bash
# Create or refresh the virtual environment at .venv and install DeepSeekEyes into it.
#   scripts/setup.sh          runtime only
#   scripts/setup.sh dev      runtime plus test and lint tools
# Re-running is cheap: nothing is reinstalled unless pyproject.toml or the extra changed.
set -euo pipefail
cd "$(dirname "$0")/.."

extra="${1:-}"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "DeepSeekEyes needs Python 3.11 or newer as '$python' (set PYTHON=...)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
spec="."
[ -n "$extra" ] && spec=".[$extra]"
stamp=".venv/.deepseek-eyes-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $spec"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
  echo "$want" > "$stamp"
fi
