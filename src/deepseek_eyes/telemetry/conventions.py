"""The attributes our spans carry: OpenTelemetry's GenAI and MCP semantic conventions in
their latest experimental form (what ``OTEL_SEMCONV_STABILITY_OPT_IN=
gen_ai_latest_experimental`` selects in instrumentations that still know older forms:
``gen_ai.provider.name``, not the older ``gen_ai.system``), and ours under ``deepseek_eyes.``.

Only identities, sizes, counts, codes and model names: never a prompt, a completion, tool
arguments or results, a URL's query, a path or a credential. Names are written here once,
as constants, rather than imported from the conventions package's ``_incubating`` modules,
which are private and move between releases.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from deepseek_eyes.telemetry.tracing import Attributes

__all__ = [
    "CHAT",
    "EXECUTE_TOOL",
    "chat_attributes",
    "chat_span_name",
    "mcp_attributes",
    "mcp_span_name",
    "mcp_wire_attributes",
    "server_address",
]

PROVIDER_NAME = "gen_ai.provider.name"
OPERATION_NAME = "gen_ai.operation.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
MCP_METHOD_NAME = "mcp.method.name"
MCP_RESOURCE_URI = "mcp.resource.uri"
MCP_SESSION_ID = "mcp.session.id"
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
NETWORK_TRANSPORT = "network.transport"

CHAT = "chat"
EXECUTE_TOOL = "execute_tool"


def server_address(url: str) -> Attributes:
    """``server.address`` and ``server.port`` of ``url`` (host and port only)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return {SERVER_ADDRESS: parts.hostname, SERVER_PORT: port}


def chat_span_name(model: str | None) -> str:
    """``{gen_ai.operation.name} {gen_ai.request.model}``."""
    return f"{CHAT} {model}" if model else CHAT


def chat_attributes(provider: str, model: str | None, url: str, *, stream: bool) -> Attributes:
    """What a chat call's span carries when it starts."""
    return {OPERATION_NAME: CHAT, PROVIDER_NAME: provider, REQUEST_MODEL: model,
            REQUEST_STREAM: stream, **server_address(url)}


def mcp_span_name(method: str, target: str | None) -> str:
    """``{mcp.method.name} {target}``: the tool or prompt name (a resource's is left out:
    its URI may hold data, and span names should stay few)."""
    return f"{method} {target}" if target else method


def mcp_attributes(method: str, server: str, *, tool: str | None = None,
                   transport: str | None = None) -> Attributes:
    """What an MCP client call's span carries (``server`` is the configured server id)."""
    return {MCP_METHOD_NAME: method, "deepseek_eyes.mcp.server": server,
            OPERATION_NAME: EXECUTE_TOOL if method == "tools/call" else None,
            TOOL_NAME: tool, NETWORK_TRANSPORT: transport}


def mcp_wire_attributes(*, session_id: str | None, protocol: str | None,
                        request_id: object) -> Attributes:
    """What an MCP client call's span learns of the wire once its request was written:
    the transport's session (absent without one), the negotiated protocol revision and the
    request's JSON-RPC id (as a string, whatever its type on the wire)."""
    values = {MCP_SESSION_ID: session_id, MCP_PROTOCOL_VERSION: protocol,
              JSONRPC_REQUEST_ID: None if request_id is None else str(request_id)}
    return {k: v for k, v in values.items() if v is not None}
