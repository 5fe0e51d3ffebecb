"""What every HTTP server of DeepSeekEyes shares, below the capabilities that serve.

The terminal and the browser both serve MCP over Streamable HTTP behind the same rules
(bearer token, Host and Origin allow-lists, rate limits, a body cap); the rules live here
once, in the composition layer, because a capability may not import another capability.
Each server names its own error codes (:class:`RefusalCodes`), so a refusal still says
which server refused.
"""

from deepseek_eyes.serving.connections import STATELESS_OWNER, STDIO_OWNER, connection_owner
from deepseek_eyes.serving.log_level import accept_log_level
from deepseek_eyes.serving.security import (
    MIN_TOKEN_BITS,
    SECURITY_HEADERS,
    HttpOptions,
    RateLimiter,
    RefusalCodes,
    SecurityMiddleware,
    allowed_hosts_for,
    allowed_origins_for,
    estimated_token_bits,
    host_allowed,
    is_strong_token,
    loopback_hosts,
    loopback_origins,
    unknown_route_handlers,
)

__all__ = [
    "MIN_TOKEN_BITS",
    "SECURITY_HEADERS",
    "STATELESS_OWNER",
    "STDIO_OWNER",
    "HttpOptions",
    "RateLimiter",
    "RefusalCodes",
    "SecurityMiddleware",
    "accept_log_level",
    "allowed_hosts_for",
    "allowed_origins_for",
    "connection_owner",
    "estimated_token_bits",
    "host_allowed",
    "is_strong_token",
    "loopback_hosts",
    "loopback_origins",
    "unknown_route_handlers",
]
