#!/usr/bin/env bash
# Set up DeepSeekEyes and run the main job offline: evidence for the bundled example image
# from the embedded local OCR route (no key, no network). --route local puts that route
# first even when a DeepSeek key in the environment would add DeepSeek's own eyes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/deepseek-eyes see --route local examples/receipt.png "$@"
