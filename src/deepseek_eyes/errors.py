"""Every failure DeepSeekEyes reports, with a stable upper-case code.

Codes are API: they appear in CLI output, JSON, audit rows and HTTP error bodies, and
tests pin them. Never rename one silently; add a new code instead.

The tree::

    DeepSeekEyesError(code, message, details)
    ├── ConfigError(ValueError)          CONFIG_*
    ├── StoreError(OSError)              STORE_*
    ├── ImageError(ValueError)           IMAGE_*
    ├── EvidenceError(ValueError)        EVIDENCE_*
    │   └── EvidenceIntegrityError       EVIDENCE_CACHE_TAMPERED
    ├── VisionError                      VISION_*
    │   ├── RouteError                   VISION_ROUTE_* (one route's operation failed)
    │   │   └── RouteTimeoutError(TimeoutError)   VISION_ROUTE_TIMEOUT
    │   ├── ProbeFailedError             VISION_PROBE_FAILED
    │   ├── VisionPathError(PermissionError)      VISION_PATH_* (vision serve's roots)
    │   └── FailoverExhaustedError       VISION_FAILOVER_EXHAUSTED
    ├── TurnError(ValueError)            RUNTIME_* (a turn could not run as asked)
    ├── GatewayError                     GATEWAY_* (the HTTP gateway)
    ├── ConsoleError                     CONSOLE_* (the web console)
    ├── TerminalError                    TERMINAL_* (the terminal MCP server)
    │   ├── PolicyBlockedError(PermissionError)   TERMINAL_POLICY_BLOCKED
    │   └── ReceiptError(ValueError)     TERMINAL_RECEIPT_*
    ├── LLMError                         LLM_* (the OpenAI-compatible client)
    ├── BrowserError                     BROWSER_* (the browser capability)
    │   ├── BrowserStaleError            BROWSER_STATE_STALE, BROWSER_REF_NOT_FOUND
    │   ├── BrowserPolicyError(PermissionError)   BROWSER_NAVIGATION_BLOCKED, BROWSER_LIMIT,
    │   │                                         BROWSER_UPLOAD_REFUSED
    │   └── BrowserTimeoutError(TimeoutError)     BROWSER_ACTION_TIMEOUT
    ├── DesktopError                     DESKTOP_* (the desktop capability)
    │   ├── DesktopStaleError            DESKTOP_STATE_STALE, DESKTOP_REF_NOT_FOUND
    │   ├── DesktopGuardError(PermissionError)    DESKTOP_FOCUS_LOST, DESKTOP_MODAL_BLOCKING,
    │   │                                         DESKTOP_COORDINATES_INVALID,
    │   │                                         DESKTOP_TARGET_MISMATCH,
    │   │                                         DESKTOP_WINDOW_REQUIRED,
    │   │                                         DESKTOP_LAUNCH_REFUSED
    │   └── DesktopTimeoutError(TimeoutError)     DESKTOP_TIMEOUT
    ├── AuditError                       AUDIT_* (the audit chain and its checkpoints)
    ├── McpError                         MCP_* (the MCP host)
    │   ├── McpTimeoutError(TimeoutError)         MCP_TIMEOUT
    │   ├── McpPolicyError(PermissionError)       MCP_TOOL_RISK_BLOCKED, MCP_*_NOT_*, MCP_CALL_QUOTA
    │   ├── McpCatalogError(ValueError)           MCP_CATALOG_*
    │   └── McpResultError(ValueError)            MCP_RESULT_*
    └── CliError                         CLI_* (the command line itself)

A class names a family; the ``code`` names the exact failure. Callers catch a family
(``except ImageError``) and branch on ``code`` only when they must.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What a ``*_UNAVAILABLE`` message tells a user to run: the one place these commands are
#: spelled, so every message that names one names the same.
FIX_PACKAGE = "scripts/setup.sh (or: pip install --upgrade deepseek-eyes)"
FIX_CHROMIUM = "sudo apt-get install chromium (or set browser.executable)"
FIX_DESKTOP = ("sudo apt-get install xvfb dbus-x11 at-spi2-core libatk-adaptor "
               "python3-pyatspi python3-gi python3-xlib gir1.2-gtk-3.0")

__all__ = [
    "ERROR_CODES",
    "FIX_CHROMIUM",
    "FIX_DESKTOP",
    "FIX_PACKAGE",
    "AuditError",
    "BrowserError",
    "BrowserPolicyError",
    "BrowserStaleError",
    "BrowserTimeoutError",
    "CliError",
    "ConfigError",
    "ConsoleError",
    "DeepSeekEyesError",
    "DesktopError",
    "DesktopGuardError",
    "DesktopStaleError",
    "DesktopTimeoutError",
    "EvidenceError",
    "EvidenceIntegrityError",
    "FailoverExhaustedError",
    "GatewayError",
    "ImageError",
    "LLMError",
    "McpCatalogError",
    "McpError",
    "McpPolicyError",
    "McpResultError",
    "McpTimeoutError",
    "PolicyBlockedError",
    "ProbeFailedError",
    "ReceiptError",
    "RouteError",
    "RouteTimeoutError",
    "StoreError",
    "TerminalError",
    "TurnError",
    "VisionError",
    "VisionPathError",
]

#: Every code with a one-line meaning. ``docs/errors.md`` is checked against this table.
ERROR_CODES: Mapping[str, str] = {
    # settings
    "CONFIG_INVALID": (
        "The settings file failed validation; details list every error with its path."
    ),
    "CONFIG_NOT_FOUND": "A settings file named with --config does not exist.",
    "CONFIG_UNREADABLE": "The settings file is not valid TOML or cannot be read.",
    "CONFIG_ENV_MISSING": "A { env = \"NAME\" } reference names a variable that is not set.",
    # a `config check` warning, never raised: the file is valid, the route never serves
    "CONFIG_MODEL_RENAMED": (
        "A model the settings name is an alias or a retired name of DeepSeek's (a config "
        "check warning naming its successor; the file stays valid)."
    ),
    "CONFIG_ROUTE_UNREACHABLE": (
        "A vision route the settings define can never be tried (a config check warning)."
    ),
    "CONFIG_FILE_EXISTS": "init was given a path that already exists; it is never overwritten.",
    "CONFIG_WRITE_FAILED": (
        "init could not create the settings file, or an edit could not write it (its "
        "directory is missing or not writable)."
    ),
    "CONFIG_EDIT_BUSY": (
        "Another edit of the settings file held its lock too long; nothing was written."
    ),
    "CONFIG_EDIT_CONFLICT": (
        "Another program kept changing the settings file during an edit (every attempt); "
        "nothing was written."
    ),
    "CONFIG_STATE_URL_INVALID": (
        "DEEPSEEK_EYES_STATE_URL is not \"local\" nor a redis:// (rediss://) URL with a "
        "host and a database number, or it carries a password, a query or a fragment."
    ),
    "CONFIG_EMPTY": (
        "The settings file a running process follows is empty or gone; refused, the "
        "running MCP servers are kept."
    ),
    # store
    "STORE_WRITE_FAILED": "A blob or database write failed; nothing partial was published.",
    "STORE_FULL": (
        "The disk that holds the data directory (or a file written there) is full; free "
        "space there and retry: nothing stored is lost, and a running gateway recovers."
    ),
    "STORE_READ_ONLY": (
        "The data directory cannot be written (a read-only copy or mount, no write "
        "permission); only the commands that read work on it."
    ),
    "STORE_READ_FAILED": (
        "A database cannot be read: it cannot be opened read-only (not a database, a WAL "
        "index that cannot be read, or a schema newer than this code), or a read failed."
    ),
    "STORE_DATABASE_UNAVAILABLE": (
        "The PostgreSQL database cannot be reached (down, restarting, the connection cut); "
        "nothing was half-written: retry when it is back."
    ),
    "STORE_BACKEND_MISSING": (
        "A PostgreSQL database_url is configured but psycopg is not installed "
        "(install the scale extra)."
    ),
    "STORE_MIGRATE_TARGET_NOT_EMPTY": (
        "store migrate copies into an empty PostgreSQL database only; the target holds "
        "tables (nothing was written)."
    ),
    "STORE_BLOB_MISSING": "A referenced blob is not in the content-addressed store.",
    "STORE_BLOB_CORRUPT": "A stored blob no longer hashes to its address.",
    "STORE_SESSION_INVALID": "A session id is malformed (1-128 letters, digits, . _ : -).",
    "STORE_SESSION_NOT_FOUND": "No session has that id.",
    "STORE_SESSION_CONFLICT": "The session kept changing under the request; send it again.",
    "STORE_SESSION_UNKEPT": "The session holds messages kept only as hashes (store: false); "
    "it cannot be continued from the store: send the whole history.",
    "STORE_SESSION_FOREIGN": (
        "The session belongs to another client scope (another gateway key, the CLI, or from "
        "before scopes); nothing was appended to it."
    ),
    # shared state (store.state_url: rate limits and single-flight leases across replicas)
    "STORE_STATE_UNAVAILABLE": (
        "The shared state (Redis, store.state_url) did not answer within store.state_timeout "
        "(down, unreachable, or refusing commands); with store.state_unavailable = "
        "\"fail_closed\" requests are refused meanwhile (HTTP 503, Retry-After)."
    ),
    "STORE_STATE_AUTH_FAILED": (
        "The shared state (Redis) refused the password or user (store.state_password, "
        "DEEPSEEK_EYES_STATE_PASSWORD)."
    ),
    "STORE_STATE_BACKEND_MISSING": (
        "store.state_url names Redis but the redis package is not installed "
        "(pip install 'deepseek-eyes[scale]')."
    ),
    # image intake
    "IMAGE_EMPTY": "The image has no bytes.",
    "IMAGE_UNSUPPORTED_FORMAT": "Not a PNG, JPEG, WebP, GIF or BMP image.",
    "IMAGE_TRUNCATED": "The image data is truncated or corrupt and cannot be decoded.",
    "IMAGE_TOO_LARGE": "The encoded image exceeds the byte limit (image.max_bytes).",
    "IMAGE_DECOMPRESSION_BOMB": (
        "The header declares more pixels than image.max_pixels, or a decoded size (width × "
        "height × bytes per pixel of the mode) over image.max_decoded_bytes"
    ),
    "IMAGE_DECODE_BUSY": (
        "Large decodes (over 16 MiB decoded) already hold every slot; the image waited 60 s "
        "and is refused."
    ),
    "IMAGE_UNREADABLE": "The image file cannot be read from disk.",
    # evidence contract
    "EVIDENCE_NOT_FOUND": (
        "The route's answer holds no JSON object for the requested contract."
    ),
    "EVIDENCE_SCHEMA_INVALID": (
        "The evidence failed the strict schema gate; details carry JSON pointers."
    ),
    "EVIDENCE_CACHE_TAMPERED": (
        "A cached evidence record no longer matches its own hash; it was refused."
    ),
    "EVIDENCE_FILE_INVALID": "An evidence file cannot be read or is not UTF-8 JSON.",
    # vision routing
    "VISION_ROUTE_UNKNOWN": "No route has that name.",
    "VISION_NO_ROUTE": "No route is configured or eligible.",
    "VISION_ROUTE_TIMEOUT": "The route did not answer within its timeout.",
    "VISION_ROUTE_UNAVAILABLE": "The route could not be reached (connection refused, DNS, TLS).",
    "VISION_ROUTE_HTTP_ERROR": "The route answered with an HTTP error status (kept in details).",
    "VISION_ROUTE_BAD_RESPONSE": "The route's answer is not a well-formed chat completion.",
    "VISION_ROUTE_STREAM_INCOMPLETE": "The route's SSE stream ended before its finish reason.",
    "VISION_ROUTE_UNHEALTHY": (
        "The route's metadata health check failed (model not listed, bad status)."
    ),
    "VISION_ROUTE_CREDENTIAL_MISSING": "The route's API key reference names an unset variable.",
    "VISION_ROUTE_ENGINE_FAILED": "The embedded local engine failed on this image.",
    "VISION_PROBE_FAILED": (
        "The route failed the randomized 3×3 pixel probe; it is not trusted until"
        " failure_cooldown passes and a new probe is tried."
    ),
    "VISION_FAILOVER_EXHAUSTED": (
        "Every eligible route failed; details carry the structured attempts."
    ),
    "VISION_FLIGHT_TIMEOUT": (
        "Another replica held the acquisition of this image (its single-flight lease) past "
        "the wait's bound and is still renewing it; nothing was called here: try again."
    ),
    "VISION_FLIGHT_LEASE_LOST": (
        "This replica's single-flight lease passed to another replica while it worked (a "
        "renewal found another holder or none answered before expiry, or the database "
        "refused its stale fencing token): its work was stopped, its result not published."
    ),
    # vision serve (the eyes as an MCP server)
    "VISION_PATH_NO_ROOTS": (
        "A path was given but no root is served (no --root, and the client offers no roots)."
    ),
    "VISION_PATH_OUTSIDE_ROOTS": (
        "The path, with symlinks resolved, lies outside every served root, or inside the"
        " data directory (never served); or the opened file has more than one hard link"
    ),
    "VISION_PATH_NOT_FOUND": "No file exists at the path inside the served roots.",
    "VISION_PATH_NOT_FILE": "The path names a directory, FIFO, device or socket, not a file.",
    "VISION_DATA_URL_INVALID": "The data: URL is malformed, not base64, or not an image type.",
    "VISION_IMAGE_REF_INVALID": "The image is not a path, a data: URL or a sha256 hex digest.",
    "VISION_IMAGE_NOT_FOUND": "No stored image has that sha256.",
    "VISION_EVIDENCE_NOT_FOUND": "No stored evidence record has that sha256.",
    "VISION_QUESTION_INVALID": "The look question is empty or longer than 500 characters.",
    "VISION_REGION_INVALID": (
        "A look region is not [x, y, w, h] with x and y in [0, 1) and w and h in (0, 1]."
    ),
    "VISION_TOKEN_MISSING": (
        "vision serve --http needs a bearer token (vision.serve.token or"
        " DEEPSEEK_EYES_VISION_TOKEN); `deepseek-eyes token` makes one."
    ),
    "VISION_TOKEN_WEAK": (
        "The bearer token holds under 256 bits by length and alphabet, or under 128 once its "
        "patterns (repeats, sequences, keyboard walks, words) are priced."
    ),
    "VISION_UNAUTHORIZED": "The HTTP request has no bearer token or the wrong one.",
    "VISION_FORBIDDEN": "The Host or Origin header is not allowed (DNS rebinding defence).",
    "VISION_RATE_LIMITED": "Too many HTTP requests from this client; retry after a pause.",
    "VISION_BODY_TOO_LARGE": "The HTTP request body exceeds vision.serve.max_body_bytes.",
    # runtime (turns)
    "RUNTIME_BAD_MESSAGE": "A chat message is malformed (role, content part or tool call).",
    "RUNTIME_IMAGE_URL_DISABLED": "An http(s) image_url was sent; gateway.allow_image_urls is off.",
    "RUNTIME_IMAGE_FETCH_FAILED": "An http(s) image could not be fetched within its limits.",
    "RUNTIME_TOO_MANY_IMAGES": "A turn holds more images than runtime.max_images_per_turn.",
    "RUNTIME_MODEL_CALL_LIMIT": "Retired: past the call bound, one call without tools answers.",
    "RUNTIME_TOOL_LIMIT": "A tool call was refused: runtime.max_tool_calls_per_turn reached.",
    "RUNTIME_TOOL_UNKNOWN": "The model called a tool that was not offered in that model call.",
    "RUNTIME_TOOL_ARGUMENTS": "A tool call's arguments are not a JSON object.",
    "RUNTIME_APPROVAL_UNAVAILABLE": "A plan needs approval; nobody can approve where it runs.",
    "RUNTIME_APPROVAL_DENIED": "The person asked denied the plan; it did not run.",
    "RUNTIME_APPROVAL_TIMEOUT": "Nobody approved the plan in runtime.approval_timeout; not run.",
    "RUNTIME_CODE_SANDBOX_UNAVAILABLE": (
        "Code Mode needs a working bubblewrap sandbox; without one no program runs."
    ),
    "RUNTIME_CODE_TIMEOUT": (
        "A Code Mode program was stopped at runtime.code_timeout or its CPU limit."
    ),
    "RUNTIME_CODE_OUTPUT_LIMIT": (
        "A Code Mode program printed more than runtime.code_max_output_bytes; it was stopped."
    ),
    "RUNTIME_CODE_FAILED": (
        "A Code Mode program ended with an error (its exit code and stderr tail)."
    ),
    "RUNTIME_CODE_PROTOCOL": "A Code Mode program sent a tool request that is not one JSON line.",
    "RUNTIME_REREAD_LIMIT": "A look call was refused: runtime.max_rereads_per_turn reached.",
    "RUNTIME_BAD_REGION": (
        "A look call's region is not [x, y, w, h] with x and y in [0, 1) and w and h in "
        "(0, 1]; the model reads the error and the turn goes on."
    ),
    "RUNTIME_TURN_ABORTED": "A turn record's code: the turn ended with no answer and no error "
    "(its reader went away, the gateway shut down, or its process died).",
    "RUNTIME_TOOL_NOT_CALLED": (
        "The request forced a tool (tool_choice any, or a named tool) and the model answered "
        "without calling it."
    ),
    "RUNTIME_THINKING_KEYRING_INVALID": (
        "The thinking-signature keyring (<data home>/thinking/keyring.json) is unreadable "
        "or malformed."
    ),
    "RUNTIME_THINKING_KEYRING_EXPOSED": (
        "The thinking-signature keyring is open to other users (or owned by another)."
    ),
    "RUNTIME_THINKING_KEY_UNKNOWN": (
        "A thinking block's signature names a key not on the ring; the block is treated as "
        "foreign (its reasoning restored from the store), never an error to the client."
    ),
    # gateway
    "GATEWAY_UNAUTHORIZED": (
        "The key is missing or wrong (as a bearer token, the scheme `Bearer` in any case, or "
        "as `x-api-key`)."
    ),
    "GATEWAY_FORBIDDEN": (
        "The Host is not a loopback name or in gateway.allowed_hosts (DNS rebinding), or the "
        "request carries an Origin that gateway.allowed_origins does not name (a web page)."
    ),
    "GATEWAY_RATE_LIMITED": "Too many requests for this key (gateway.rate_limit_per_minute).",
    "GATEWAY_UNSUPPORTED_MEDIA_TYPE": (
        "A POST whose Content-Type is not application/json (what a cross-site page sends)."
    ),
    "GATEWAY_KEY_WEAK": (
        "The gateway key holds under 256 bits by length and alphabet, or under 128 once its "
        "patterns are priced; `deepseek-eyes token` makes a strong one."
    ),
    "GATEWAY_KEY_REQUIRED": (
        "The gateway offers tools that act on this machine (terminal, browser, desktop, MCP "
        "tools that are not read-only) and has no key."
    ),
    "GATEWAY_BAD_REQUEST": (
        "The request body is not a valid chat completion request: not JSON, a NaN or "
        "Infinity number, a lone surrogate, or a field of the wrong type (param names it)."
    ),
    "GATEWAY_JSON_TOO_DEEP": "The request body nests arrays and objects deeper than 64 levels.",
    "GATEWAY_JSON_TOO_MANY_NODES": (
        "The request body holds more JSON values than gateway.max_body_nodes, or an array or "
        "object with more than 100,000 members; refused before it is parsed."
    ),
    "GATEWAY_BODY_TEXT_TOO_LARGE": (
        "The request body's bytes that are not base64 image data exceed "
        "gateway.max_text_bytes (image data counts only toward gateway.max_body_bytes)."
    ),
    "GATEWAY_BODY_TOO_LARGE": "The request body exceeds gateway.max_body_bytes.",
    "GATEWAY_BODY_TIMEOUT": "The request body did not arrive within gateway.body_timeout.",
    "GATEWAY_IDEMPOTENCY_KEY_INVALID": "The Idempotency-Key header is empty, over 255 "
    "characters or not printable ASCII.",
    "GATEWAY_IDEMPOTENCY_IN_PROGRESS": "A request under this Idempotency-Key is still running.",
    "GATEWAY_IDEMPOTENCY_KEY_REUSED": "This Idempotency-Key named a different request.",
    "GATEWAY_IDEMPOTENCY_UNKEPT": "An Idempotency-Key needs the answer kept for replay; "
    "a request with store: false keeps none.",
    "GATEWAY_NOT_FOUND": "No such endpoint or model.",
    "GATEWAY_RESPONSE_NOT_FOUND": "previous_response_id names no response stored for this "
    "gateway key (unknown, another key's, or answered with store: false).",
    "GATEWAY_METHOD_NOT_ALLOWED": "The endpoint exists but does not take this HTTP method.",
    "GATEWAY_INTERNAL_ERROR": "An unexpected failure inside the gateway (logged on the server).",
    "GATEWAY_SHUTTING_DOWN": (
        "The gateway is stopping: the request came after the stop began, or was still "
        "running when gateway.drain_timeout ran out or a second signal came."
    ),
    "GATEWAY_NO_REPLICA": "The load balancer in front of the gateway has no ready replica "
    "to send the request to; send it again shortly.",
    "GATEWAY_REPLICA_TIMEOUT": "A gateway replica did not answer within the load "
    "balancer's timeout; the turn may have run, so send the same history again.",
    "GATEWAY_REPLICA_FAILED": "A gateway replica closed the connection or sent a broken "
    "answer, and the load balancer had no retry left; send the request again.",
    "GATEWAY_UNSAFE_BIND": "Refused to listen beyond loopback without a gateway key.",
    "GATEWAY_CHECK_TIMEOUT": "A readiness check did not finish within "
    "gateway.readiness_timeout (/readyz answers 503 and names the check).",
    "GATEWAY_UPSTREAM_KEY_REFUSED": "The upstream answered /readyz's reachability check "
    "with 401 or 403: it refuses the [llm] key, so every turn would fail.",
    # terminal
    "TERMINAL_POLICY_BLOCKED": (
        "The policy engine refused the command; details carry the risk and every reason."
    ),
    "TERMINAL_APPROVAL_REQUIRED": "The plan needs approval before it can be executed.",
    "TERMINAL_PLAN_NOT_FOUND": "No plan has that id in this session.",
    "TERMINAL_PLAN_STATE": (
        "The plan is not in a state that allows this (already executed, denied or running)."
    ),
    "TERMINAL_PLAN_CHANGED": (
        "A path or the executable resolves differently at execute time than when planned."
    ),
    "TERMINAL_SESSION_NOT_FOUND": "No execution session has that id (closed or expired).",
    "TERMINAL_NOT_FOUND": (
        "No such console API endpoint or session action (a session takes pause, resume and "
        "cancel), or it does not take that method."
    ),
    "TERMINAL_SESSION_LIMIT": "The maximum number of concurrent execution sessions is open.",
    "TERMINAL_SESSION_BUSY": "The session already has an active process (one at a time).",
    "TERMINAL_NO_ACTIVE_PROCESS": "The session has no running process to pause, resume or cancel.",
    "TERMINAL_SPAWN_FAILED": "The process could not be started (exec failed, sandbox error).",
    "TERMINAL_WORKSPACE_INVALID": (
        "A workspace root does not exist, or the working directory lies outside every root."
    ),
    "TERMINAL_TOKEN_MISSING": (
        "HTTP serving needs a bearer token (terminal.token or DEEPSEEK_EYES_TERMINAL_TOKEN); "
        "`deepseek-eyes token` makes one."
    ),
    "TERMINAL_TOKEN_WEAK": (
        "The bearer token holds under 256 bits by length and alphabet, or under 128 once its "
        "patterns (repeats, sequences, keyboard walks, words) are priced."
    ),
    "TERMINAL_RECEIPT_INVALID": (
        "A receipt or a receipt chain head fails verification: malformed (including a"
        " duplicate JSON key or a NaN), or its signature does not match its bytes."
    ),
    "TERMINAL_RECEIPT_KEY_UNKNOWN": "A receipt names a key id that is not in the keyring.",
    "TERMINAL_RECEIPT_CHAIN_BROKEN": (
        "Receipts out of sequence, a previous_hash that does not match the receipt before it,"
        " a chain that does not start at sequence 1, or a log that does not end at (or no"
        " longer holds) the receipt its signed head names: receipts were removed."
    ),
    "TERMINAL_RECEIPT_NOT_FOUND": "No receipt has that id.",
    "TERMINAL_KEYRING_INVALID": "The receipt keyring file is unreadable or malformed.",
    "TERMINAL_KEYRING_EXPOSED": (
        "The receipt keyring file is readable or writable by other users (or owned by one),"
        " or its directory or the receipt log's cannot be made private: the key may be"
        " known; fix the mode or start over."
    ),
    "TERMINAL_ADVISOR_UNAVAILABLE": "No advisory model is configured or it failed to answer.",
    "TERMINAL_UNAUTHORIZED": "The HTTP request has no bearer token or the wrong one.",
    "TERMINAL_FORBIDDEN": "The Host or Origin header is not allowed (DNS rebinding defence).",
    "TERMINAL_RATE_LIMITED": "Too many HTTP requests from this client; retry after a pause.",
    "TERMINAL_BODY_TOO_LARGE": "The HTTP request body exceeds terminal.max_body_bytes.",
    "TERMINAL_ARGUMENT_INVALID": (
        "An argument has the wrong type, an unknown name, or a number that is not finite or "
        "lies outside its range."
    ),
    "TERMINAL_PLAN_LIMIT": (
        "The session holds its maximum number of plans and none is settled; finish, deny or "
        "close before planning more."
    ),
    "TERMINAL_SELF_APPROVAL_REFUSED": (
        "The MCP client that planned a command tried to approve it, and approvals are a "
        "person's (terminal.approvals = \"person\", the default): a person approves in the "
        "approval console."
    ),
    "TERMINAL_CONSOLE_LOGIN_REQUIRED": (
        "The console API was called without a live console login (its cookie); the MCP "
        "bearer token does not open it."
    ),
    "TERMINAL_CONSOLE_LOGIN_INVALID": (
        "The console login code is wrong or already used; open the newest one-time link the "
        "server printed."
    ),
    # llm client
    "LLM_CREDENTIAL_MISSING": "The final-model key reference names an unset variable.",
    "LLM_TIMEOUT": "The model endpoint did not answer within its timeout.",
    "LLM_UNAVAILABLE": "The model endpoint could not be reached.",
    "LLM_HTTP_ERROR": (
        "The model endpoint answered with an HTTP error status (a busy one, 429 or 5xx, "
        "after llm.max_retries retries)."
    ),
    "LLM_REASONING_MISSING": (
        "In thinking mode, an assistant message with tool calls has no reasoning_content and "
        "none can be restored (the gateway did not issue those calls); nothing was sent."
    ),
    "LLM_BAD_RESPONSE": "The model endpoint's answer is not a well-formed chat completion.",
    "LLM_STREAM_INCOMPLETE": "The model endpoint's stream ended before a finish reason.",
    "LLM_MODEL_UNKNOWN": (
        "No final model is configured and the endpoint lists none (a listing that failed "
        "keeps its own code, e.g. LLM_UNAVAILABLE)."
    ),
    "LLM_IMAGE_REFUSED": (
        "The upstream refused image parts for this model (HTTP 400): it is known text-only "
        "until llm.sight_ttl passes, and the turn went on with evidence (a learned verdict's "
        "code, never a failed turn)."
    ),
    "LLM_PROBE_MISMATCH": (
        "The model named the wrong colours of the pixel probe: it does not read the pixels it "
        "is sent, and gets evidence until llm.sight_ttl passes (a learned verdict's code)."
    ),
    # mcp host
    "MCP_SERVER_UNKNOWN": "No configured MCP server has that id.",
    "MCP_SERVER_DISABLED": (
        "The server (or MCP as a whole, or this plane) is disabled in the settings."
    ),
    "MCP_SERVER_UNAVAILABLE": (
        "The server is not connected (starting, reconnecting, failed or stopped)."
    ),
    "MCP_CONNECT_FAILED": "The server could not be started or reached, or its handshake failed.",
    "MCP_CLOSE_PENDING": (
        "The server's previous connection did not finish closing; no probe or new connection "
        "opens until it does."
    ),
    "CONSOLE_UNAUTHORIZED": (
        "The web console refused a request that needs a credential it does not take here."
    ),
    "CONSOLE_FORBIDDEN": (
        "The web console refused the Host (loopback by default), an Origin other than its "
        "own, or a request another site's page made."
    ),
    "CONSOLE_RATE_LIMITED": (
        "Too many web console requests; retry after a pause."
    ),
    "CONSOLE_BODY_TOO_LARGE": (
        "The web console request body exceeds 64 KiB."
    ),
    "CONSOLE_UNSUPPORTED_MEDIA_TYPE": (
        "A web console POST whose Content-Type is not application/json."
    ),
    "CONSOLE_BODY_TIMEOUT": (
        "The web console request body did not arrive in time."
    ),
    "CONSOLE_LOGIN_REQUIRED": (
        "The web console API was called without a live console login (its cookie); the "
        "gateway key and MCP tokens do not open it."
    ),
    "CONSOLE_LOGIN_INVALID": (
        "The web console login code is wrong or already used; open the newest one-time link "
        "the server printed."
    ),
    "CONSOLE_CSRF_INVALID": (
        "A state-changing web console request without the login's CSRF token or without the "
        "console's own Origin; nothing was done."
    ),
    "CONSOLE_ARGUMENT_INVALID": (
        "A web console request body or parameter is malformed; nothing was done."
    ),
    "CONSOLE_NOT_FOUND": (
        "No such web console endpoint or record (HTTP 404 or 405; the answer is JSON)."
    ),
    "CONSOLE_UNAVAILABLE": (
        "That part of the web console needs the running gateway (its terminal or MCP host) or"
        " a settings file; nothing was done."
    ),
    "CONSOLE_SCOPE_DENIED": (
        "A web console login made with the gateway key sees that client's own conversations "
        "only; approvals, MCP, vision, audit and usage take the person's login (the "
        "one-time link)."
    ),
    "CONSOLE_SIGNIN_PENDING": (
        "An MCP server named no authorization URL in time after a console sign-in began; "
        "the sign-in goes on in the background: ask its state again."
    ),
    "CONSOLE_PROBE_FAILED": (
        "The final model's sight probe got no answer (a timeout, a 5xx, no key); nothing was "
        "learned, the failure is audited as llm.sight, and the priors stay in charge."
    ),
    "CONTROL_UNAUTHORIZED": (
        "The control API request has no bearer token or the wrong one (the token is in the "
        "data directory's control.json, readable by its owner only)."
    ),
    "CONTROL_FORBIDDEN": (
        "The control API refused the Host (loopback only), an Origin (none is allowed) or a "
        "request another site's page made."
    ),
    "CONTROL_RATE_LIMITED": (
        "Too many control API requests; retry after a pause."
    ),
    "CONTROL_BODY_TOO_LARGE": (
        "The control API request body exceeds 64 KiB."
    ),
    "CONTROL_UNSUPPORTED_MEDIA_TYPE": (
        "A control API POST whose Content-Type is not application/json."
    ),
    "CONTROL_BODY_TIMEOUT": (
        "The control API request body did not arrive in time."
    ),
    "CONTROL_UNREACHABLE": (
        "The running gateway's control API stopped answering."
    ),
    "CONTROL_NOT_FOUND": (
        "No such control API endpoint, or it does not take that method."
    ),
    "CONTROL_MCP_NOT_RUNNING": (
        "The running gateway runs no MCP host (mcp not among runtime.tool_sources, or it "
        "started without a settings file to follow): restart it to add servers."
    ),
    "MCP_AUTH_FAILED": (
        "The server refused our credentials, or OAuth client_credentials failed."
    ),
    "MCP_CLIENT_KEY_INVALID": (
        "The private key of a `private_key_jwt` client cannot be used: its file cannot be "
        "read or may be read by others (not mode 0600), or it is not an unencrypted PEM "
        "private key that can sign the configured `signing_algorithm`."
    ),
    "MCP_LOGIN_REQUIRED": (
        "An authorization-code server needs a person to sign in (no sign-in is held, or the "
        "server asked for a new authorization: a refused refresh, a scope step-up); run "
        "`deepseek-eyes mcp login ID`. A connection never opens a browser itself."
    ),
    "MCP_LOGIN_FAILED": (
        "`mcp login` did not complete: the authorization server refused the sign-in, the "
        "OAuth flow failed (discovery, registration, token exchange), or the redirect "
        "listener could not start."
    ),
    "MCP_OAUTH_INSECURE_ENDPOINT": (
        "An endpoint an authorization server's metadata names (authorization, token, "
        "registration, an authorization server or a metadata URL) is not https and not on "
        "this machine; the OAuth flow stops before anything is sent there, for every grant."
    ),
    "MCP_OAUTH_NO_PKCE": (
        "The authorization server does not advertise S256 in "
        "`code_challenge_methods_supported`; sign-in is refused before a browser is shown."
    ),
    "MCP_OAUTH_DOCUMENT_TOO_LARGE": (
        "A discovery document (or another answer to the OAuth flow's own requests) is over "
        "1 MiB; it is not read further and the flow stops."
    ),
    "MCP_LOGIN_UNSUPPORTED": (
        "`mcp login`/`logout` names a server whose settings have no `oauth` of type "
        "`authorization_code`."
    ),
    "MCP_TIMEOUT": "The server did not answer within its timeout.",
    "MCP_SERVER_ERROR": "The server answered a request with a protocol error.",
    "MCP_CONNECTION_LOST": (
        "The server's process or connection ended, during a request or as its liveness "
        "checks found."
    ),
    "MCP_RESPONSE_INVALID": (
        "The server sent a message that is not valid JSON-RPC (a stdio server wrote "
        "something else to its stdout); the requests in flight failed at once."
    ),
    "MCP_CATALOG_INVALID": (
        "A discovered catalog holds a duplicate or malformed entry; the whole generation "
        "was rejected."
    ),
    "MCP_CATALOG_LIMIT": (
        "A discovered catalog exceeds a discovery budget (count, size, depth, nodes or "
        "pages); the whole generation was rejected."
    ),
    "MCP_CATALOG_CURSOR_LOOP": (
        "The server repeated a pagination cursor; the whole generation was rejected."
    ),
    "MCP_EXPOSURE_SUSPENDED": "Exposure is suspended while servers are stopped or reconfigured.",
    "MCP_TOOL_NOT_EXPOSED": (
        "No exposed tool has that name (unknown, not allowed, denied or over budget)."
    ),
    "MCP_TOOL_RISK_BLOCKED": (
        "The server's risk_policy is read-only and the tool is not annotated readOnlyHint: true."
    ),
    "MCP_GENERATION_STALE": (
        "The definition belongs to an older catalog generation than the live one; it was not run."
    ),
    "MCP_CALL_DENIED": (
        "The tool is ask-first (mcp.servers[].ask) and a person denied the call, or its "
        "session closed while it waited; nothing was sent to the server."
    ),
    "MCP_APPROVAL_TIMEOUT": (
        "The tool is ask-first and nobody approved the call within mcp.ask_timeout; nothing "
        "was sent to the server."
    ),
    "MCP_APPROVAL_NOT_FOUND": (
        "No ask-first call waits under that id (decided already, expired, or never asked)."
    ),
    "MCP_APPROVAL_DECIDED": (
        "A person decided that ask-first call already (on this replica or another); the "
        "first decision stands and this one did nothing."
    ),
    "MCP_APPROVAL_EXPIRED": (
        "The ask-first call waited in a gateway replica that is gone (stopped or no longer "
        "heard from); the call ended with it and nothing can release it."
    ),
    "MCP_ARGUMENTS_INVALID": (
        "The call's arguments are not a JSON object or miss a required prompt argument."
    ),
    "MCP_CALL_QUOTA": (
        "The run reached mcp.max_external_calls_per_run; the server was not contacted."
    ),
    "MCP_RESULT_CONTEXT_UNAVAILABLE": (
        "A Code Mode nested call has no open channel to report its result to the model; "
        "the server was not contacted."
    ),
    "MCP_RESOURCE_NOT_ALLOWED": (
        "The URI is not a discovered, allowed resource or a match of an allowed template."
    ),
    "MCP_PROMPT_NOT_ALLOWED": "No discovered, allowed prompt has that name.",
    "MCP_RESULT_DEPTH_LIMIT": "The result nests deeper than 64 levels.",
    "MCP_RESULT_VALUES_LIMIT": "The result holds more than 50,000 values.",
    "MCP_RESULT_BLOCKS_LIMIT": "The result holds more than 4,096 content blocks.",
    "MCP_RESULT_STRING_LIMIT": (
        "The result's non-image strings (keys included) exceed 16 Mi characters."
    ),
    "MCP_RESULT_IMAGE_COUNT_LIMIT": "The result holds more than 8 images.",
    "MCP_RESULT_IMAGE_ENCODED_LIMIT": "The result's encoded image data exceeds 28 MiB.",
    "MCP_RESULT_IMAGE_DECODED_LIMIT": "The result's decoded image data exceeds 20 MiB.",
    "MCP_RESULT_BYTES_LIMIT": "The result's raw byte values exceed 20 MiB.",
    "MCP_RESULT_IMAGE_INVALID": (
        "An image block is not valid base64 of a PNG, JPEG, GIF or WebP image; no image "
        "of the batch was stored."
    ),
    "MCP_RESULT_PERSIST_FAILED": (
        "The result's artifact or image blobs could not be written; the call was rejected."
    ),
    "MCP_IMPORT_INVALID": "An imported MCP JSON file is malformed or holds a literal secret.",
    "MCP_CREDENTIAL_IN_ARGUMENTS": (
        "A server entry to register or import carries a credential literally (a --token V "
        "or --api-key=V argument, -p PASSWORD, --password V, --cookie V, KEY=value with a "
        "secret-looking name, an Authorization, Cookie or other credential header such as "
        "X-Api-Key, a token-shaped value, user:password@ in a URL or DSN, a credential key in "
        "a URL's query, matrix parameters or fragment, a token shape in its path); reference "
        "it from the environment instead."
    ),
    "MCP_SERVER_EXISTS": "A server with that id is already in the settings file.",
    "MCP_COMMAND_NOT_FOUND": (
        "An imported stdio server's command is neither on PATH nor an executable file; "
        "that server was not imported (with --strict, nothing was)."
    ),
    # browser
    "BROWSER_UNAVAILABLE": (
        "Chromium or the playwright package is missing, or the browser could not start."
    ),
    "BROWSER_STATE_STALE": (
        "The action names a state_id that is not the newest state; it was not executed "
        "and a fresh observation was returned."
    ),
    "BROWSER_REF_NOT_FOUND": (
        "The ref is not in the current state, or its element is gone; nothing was done."
    ),
    "BROWSER_NAVIGATION_BLOCKED": (
        "The URL, or a redirect hop of its load, is refused by the network policy (scheme, "
        "deny list, allow lists, the private-network guard by host or resolved address)."
    ),
    "BROWSER_NAVIGATION_FAILED": "The page could not be loaded (network error, bad address).",
    "BROWSER_ACTION_TIMEOUT": "The action did not finish within browser.action_timeout.",
    "BROWSER_ACTION_FAILED": (
        "The element cannot take this action (disabled, not editable, not a select)."
    ),
    "BROWSER_ARGUMENT_INVALID": "A tool argument is missing, of the wrong type or out of range.",
    "BROWSER_DIALOG_OPEN": (
        "A JavaScript dialog blocks the page; answer it with browser_dialog first."
    ),
    "BROWSER_NO_DIALOG": "browser_dialog was called but no dialog is open.",
    "BROWSER_LIMIT": (
        "A bound of the browser session is reached (tabs, page loads, sessions)."
    ),
    "BROWSER_UPLOAD_REFUSED": (
        "The file is outside browser.upload_roots (or uploads are off), missing, not a "
        "regular file or too large, has more than one hard link (unless "
        "browser.upload_allow_hard_links) or is one of the data directory's files"
    ),
    "BROWSER_TOKEN_MISSING": (
        "browser serve --http needs a bearer token (browser.token or "
        "DEEPSEEK_EYES_BROWSER_TOKEN); `deepseek-eyes token` makes one."
    ),
    "BROWSER_TOKEN_WEAK": (
        "The bearer token holds under 256 bits by length and alphabet, or under 128 once its "
        "patterns (repeats, sequences, keyboard walks, words) are priced."
    ),
    "BROWSER_UNAUTHORIZED": "The HTTP request has no bearer token or the wrong one.",
    "BROWSER_FORBIDDEN": "The Host or Origin header is not allowed (DNS rebinding defence).",
    "BROWSER_RATE_LIMITED": "Too many HTTP requests from this client; retry after a pause.",
    "BROWSER_BODY_TOO_LARGE": "The HTTP request body exceeds browser.max_body_bytes.",
    # desktop
    "DESKTOP_UNAVAILABLE": (
        "The native helper could not start: no X display, no AT-SPI bus, or desktop.python "
        "cannot import gi (Gio, Atspi 2.0) and Xlib."
    ),
    "DESKTOP_STATE_STALE": (
        "The action names a state_id that is not the newest state; it was not executed "
        "and a fresh observation was returned."
    ),
    "DESKTOP_REF_NOT_FOUND": "The ref is not in the current state; nothing was done.",
    "DESKTOP_TARGET_GONE": (
        "The window or element the call names no longer exists (destroyed, closed); "
        "nothing was done and nothing else was used instead."
    ),
    "DESKTOP_FOCUS_LOST": (
        "The keyboard focus is not on the intended window (another window holds it or took "
        "it back); no text was sent."
    ),
    "DESKTOP_MODAL_BLOCKING": (
        "A modal dialog of the application is open over the target window; answer it first. "
        "Nothing was sent."
    ),
    "DESKTOP_COORDINATES_INVALID": (
        "The point is outside the returned screenshot, the target window or the named "
        "element; nothing was done."
    ),
    "DESKTOP_TARGET_MISMATCH": (
        "The element does not belong to the named window; nothing was done."
    ),
    "DESKTOP_WINDOW_REQUIRED": (
        "Typing at coordinates needs a window: a window_ref, or a window-scoped observation "
        "as the newest state."
    ),
    "DESKTOP_LAUNCH_REFUSED": (
        "The app is not named in desktop.apps, or desktop.max_processes are running."
    ),
    "DESKTOP_ARGUMENT_INVALID": "A tool argument is missing, of the wrong type or out of range.",
    "DESKTOP_ACTION_FAILED": (
        "The element cannot take this action (no action, not editable), or the native "
        "helper failed."
    ),
    "DESKTOP_TIMEOUT": "The native helper did not answer within desktop.helper_timeout.",
    "DESKTOP_TOKEN_MISSING": (
        "desktop serve --http needs a bearer token (desktop.token or "
        "DEEPSEEK_EYES_DESKTOP_TOKEN); `deepseek-eyes token` makes one."
    ),
    "DESKTOP_TOKEN_WEAK": (
        "The bearer token holds under 256 bits by length and alphabet, or under 128 once its "
        "patterns (repeats, sequences, keyboard walks, words) are priced."
    ),
    "DESKTOP_UNAUTHORIZED": "The HTTP request has no bearer token or the wrong one.",
    "DESKTOP_FORBIDDEN": "The Host or Origin header is not allowed (DNS rebinding defence).",
    "DESKTOP_RATE_LIMITED": "Too many HTTP requests from this client; retry after a pause.",
    "DESKTOP_BODY_TOO_LARGE": "The HTTP request body exceeds desktop.max_body_bytes.",
    # the audit chain
    "AUDIT_CHAIN_BROKEN": (
        "The audit chain has a gap, a reordered or inserted entry, or an entry whose prev "
        "does not match the hash before it; or it ends before a checkpoint (cut)."
    ),
    "AUDIT_ENTRY_TAMPERED": "An audit chain entry's fields no longer hash to the hash it carries.",
    "AUDIT_RECORD_TAMPERED": (
        "An audited record no longer matches the digest its chain entry holds."
    ),
    "AUDIT_RECORD_MISSING": (
        "An audited record named by a chain entry is gone, and no retention entry covers it."
    ),
    "AUDIT_RECORD_UNCHAINED": (
        "An audited table holds a record that no chain entry names (written outside the "
        "chain)."
    ),
    "AUDIT_CHECKPOINT_INVALID": (
        "A checkpoint is malformed, its signature does not match, or the chain entry at its "
        "seq has another hash."
    ),
    "AUDIT_KEY_UNKNOWN": "A checkpoint names a key id that is not on the audit keyring.",
    "AUDIT_KEY_MISSING": (
        "The audit keyring is missing where a chain, checkpoint or export needs it "
        "(verify never creates a key; a retention cut without it is not made)."
    ),
    "AUDIT_KEY_REPLACED": (
        "The newest checkpoint (or the pinned one) was signed with a key that is not on "
        "the audit keyring: the keyring was replaced since."
    ),
    "AUDIT_CHECKPOINT_MISSING": (
        "The chain has entries but no signed checkpoint, or a checkpoint's signed "
        "ordinal shows that checkpoints before it were removed."
    ),
    "AUDIT_EXPORT_MISMATCH": (
        "An audit export's header (entry count, head, checkpoint count or its "
        "signature) does not match its lines."
    ),
    "AUDIT_KEYRING_INVALID": "The audit keyring file is unreadable or malformed.",
    "AUDIT_KEYRING_EXPOSED": (
        "The audit keyring file is readable or writable by other users (or owned by one), or "
        "its directory cannot be made private."
    ),
    "AUDIT_EXPORT_INVALID": (
        "An audit export file is unreadable or not deepseekeyes.audit.v1 JSON lines."
    ),
    "AUDIT_NOT_FOUND": (
        "Nothing in the audit has that id (chain seq, turn, image, evidence, operation or "
        "request hash)."
    ),
    # command line
    "CLI_USAGE": (
        "The command line is malformed (unknown command or option, missing or bad argument); "
        "exit status 2."
    ),
    "CLI_OUTPUT_DIR_MISSING": "An output file's directory does not exist; it is never created.",
    "CLI_OUTPUT_FORMAT_UNKNOWN": (
        "An output file's extension names no format it can be written in (.png, .jpg, .jpeg, "
        ".webp)."
    ),
    "CLI_ADDRESS_IN_USE": "The host and port to listen on are already in use.",
}


class DeepSeekEyesError(Exception):
    """Root of every error this package raises on purpose.

    Attributes:
        code: stable upper-case identifier from :data:`ERROR_CODES`.
        message: one human sentence; never contains secrets or image bytes.
        details: JSON-serializable structure for machines (pointers, attempts, status).
    """

    default_code = "DEEPSEEK_EYES_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        resolved = code or self.default_code
        if resolved not in ERROR_CODES:
            raise ValueError(f"unregistered error code {resolved!r}")  # a programming error
        super().__init__(message)
        self.code = resolved
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by the CLI and, later, the gateway."""
        return {"code": self.code, "message": self.message, "details": self.details}


class ConfigError(DeepSeekEyesError, ValueError):
    default_code = "CONFIG_INVALID"


class StoreError(DeepSeekEyesError, OSError):
    default_code = "STORE_WRITE_FAILED"


class ImageError(DeepSeekEyesError, ValueError):
    default_code = "IMAGE_UNSUPPORTED_FORMAT"


class EvidenceError(DeepSeekEyesError, ValueError):
    default_code = "EVIDENCE_SCHEMA_INVALID"


class EvidenceIntegrityError(EvidenceError):
    default_code = "EVIDENCE_CACHE_TAMPERED"


class VisionError(DeepSeekEyesError):
    default_code = "VISION_NO_ROUTE"


class VisionPathError(VisionError, PermissionError):
    """``vision serve`` refused a path: no roots, outside them, missing, or not a file."""

    default_code = "VISION_PATH_OUTSIDE_ROOTS"


class RouteError(VisionError):
    """One route's operation failed. ``operational`` failures open the route's circuit."""

    default_code = "VISION_ROUTE_UNAVAILABLE"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
        operational: bool = True,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.operational = operational


class RouteTimeoutError(RouteError, TimeoutError):
    default_code = "VISION_ROUTE_TIMEOUT"


class ProbeFailedError(VisionError):
    default_code = "VISION_PROBE_FAILED"


class FailoverExhaustedError(VisionError):
    default_code = "VISION_FAILOVER_EXHAUSTED"


class TurnError(DeepSeekEyesError, ValueError):
    """A turn could not be run as asked (bad message, limits)."""

    default_code = "RUNTIME_BAD_MESSAGE"


class ConsoleError(DeepSeekEyesError):
    """The web console refused a request; ``code`` names which."""

    default_code = "CONSOLE_ARGUMENT_INVALID"


class GatewayError(DeepSeekEyesError):
    """The HTTP gateway refused a request or could not start."""

    default_code = "GATEWAY_BAD_REQUEST"


class TerminalError(DeepSeekEyesError):
    """The terminal server refused an operation; ``code`` names which."""

    default_code = "TERMINAL_PLAN_STATE"


class PolicyBlockedError(TerminalError, PermissionError):
    """The policy engine refused a command; ``details`` carry the decision."""

    default_code = "TERMINAL_POLICY_BLOCKED"


class ReceiptError(TerminalError, ValueError):
    """A receipt, an export or the keyring failed verification or could not be read."""

    default_code = "TERMINAL_RECEIPT_INVALID"


class AuditError(DeepSeekEyesError):
    """The audit chain, a checkpoint, the audit keyring or an export failed a check."""

    default_code = "AUDIT_CHAIN_BROKEN"


class LLMError(DeepSeekEyesError):
    """The OpenAI-compatible client failed; ``details['status']`` keeps an upstream status."""

    default_code = "LLM_BAD_RESPONSE"


class BrowserError(DeepSeekEyesError):
    """The browser refused or failed an action; ``code`` names which."""

    default_code = "BROWSER_ACTION_FAILED"


class BrowserStaleError(BrowserError):
    """The action was planned on an older state (or a ref that no longer resolves); it was
    not executed. ``details['observation']`` may carry the fresh state the caller should use."""

    default_code = "BROWSER_STATE_STALE"


class BrowserPolicyError(BrowserError, PermissionError):
    """The navigation policy or a session bound refused the action before it ran."""

    default_code = "BROWSER_NAVIGATION_BLOCKED"


class BrowserTimeoutError(BrowserError, TimeoutError):
    default_code = "BROWSER_ACTION_TIMEOUT"


class DesktopError(DeepSeekEyesError):
    """The desktop refused or failed an action; ``code`` names which."""

    default_code = "DESKTOP_ACTION_FAILED"


class DesktopStaleError(DesktopError):
    """The action was planned on an older state or names a ref that state lacks; it was
    not executed."""

    default_code = "DESKTOP_STATE_STALE"


class DesktopGuardError(DesktopError, PermissionError):
    """A guard refused input before anything was sent (focus, modal, coordinates, target
    agreement, launch policy)."""

    default_code = "DESKTOP_FOCUS_LOST"


class DesktopTimeoutError(DesktopError, TimeoutError):
    default_code = "DESKTOP_TIMEOUT"


class McpError(DeepSeekEyesError):
    """The MCP host failed to reach, list or call a server; ``code`` names which."""

    default_code = "MCP_SERVER_UNAVAILABLE"


class McpTimeoutError(McpError, TimeoutError):
    default_code = "MCP_TIMEOUT"


class McpPolicyError(McpError, PermissionError):
    """Exposure policy refused the call before the server was contacted."""

    default_code = "MCP_TOOL_NOT_EXPOSED"


class McpCatalogError(McpError, ValueError):
    """A discovered catalog was rejected whole (duplicate, malformed or over budget)."""

    default_code = "MCP_CATALOG_INVALID"


class McpResultError(McpError, ValueError):
    """A result failed admission or persistence; nothing of it was stored or exposed."""

    default_code = "MCP_RESULT_DEPTH_LIMIT"


class CliError(DeepSeekEyesError):
    """The command line itself was refused: a malformed invocation (exit status 2) or an
    output it cannot write as asked (exit status 1)."""

    default_code = "CLI_USAGE"
