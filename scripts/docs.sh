#!/usr/bin/env bash
# Serve the documentation site locally (http://127.0.0.1:8000 unless an address is given),
# rebuilt on every edit; `scripts/docs.sh build` writes it to build/site instead, with
# --strict (a broken link, anchor or missing page fails). The reference pages (commands,
# settings, error codes) are generated from the code by scripts/docs_hooks.py at build time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "build" ]; then
  exec .venv/bin/mkdocs build --strict --clean
fi
exec .venv/bin/mkdocs serve --dev-addr "${1:-127.0.0.1:8000}"
