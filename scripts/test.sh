#!/usr/bin/env bash
# Set up DeepSeekEyes with everything its tests use, then run lint, type checks, the
# import layers (import-linter), the terminal and vision servers' conformance checks and the
# whole test suite (which builds the documentation site with `mkdocs build --strict` and runs
# the examples of README.md and the guides: tests/docsgen). Extra arguments go to pytest. With CI=true a missing test dependency
# fails instead of skipping. pytest runs on one worker per core, at most four (pytest-xdist;
# each test file whole on one worker, so a file's module fixtures start once);
# TEST_WORKERS=1 runs everything in this one process.
#   .venv          the package with its dev extras (scripts/setup.sh dev)
#   Debian, npm    bubblewrap, chromium, Node 22, the MCP conformance suite and the MCP
#                  Inspector (scripts/ci-deps.sh; apt-get runs through sudo when not root)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
scripts/ci-deps.sh
.venv/bin/ruff check src tests bench scripts
.venv/bin/mypy
.venv/bin/lint-imports --no-cache  # the layers of docs/architecture.md (pyproject.toml)
scripts/terminal-conformance.sh
scripts/vision-conformance.sh  # vision serve: the suite over HTTP, the Inspector over both
scripts/mcp-conformance.sh  # the MCP host client against the suite's client scenarios
workers="${TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}"
if [ "$workers" -gt 4 ]; then workers=4; fi
if [ "$workers" -le 1 ]; then
  exec .venv/bin/pytest "$@"
fi
exec .venv/bin/pytest -n "$workers" --dist loadfile "$@"
