#!/usr/bin/env bash
# Set up DeepSeekEyes with its test tools, then run lint, type checks and the whole test
# suite. Extra arguments go to pytest. With CI=true a missing test dependency fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/pytest "$@"
