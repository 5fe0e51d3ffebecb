#!/usr/bin/env bash
# Set up DeepSeekEyes and run the main job offline: evidence for the bundled example image
# from the embedded local OCR route (no key, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/deepseek-eyes see examples/receipt.png "$@"
