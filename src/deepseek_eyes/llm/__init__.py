"""The one layer that speaks HTTP to model endpoints (OpenAI-compatible chat, streaming, usage)
and knows which final models exist.

Everything above it imports from here, never ``httpx`` itself (ruff's banned-API list
enforces that), so transport failures always surface as :class:`~deepseek_eyes.errors.LLMError`
with a stable ``LLM_*`` code.
"""

from deepseek_eyes.llm.catalog import (
    MAX_LISTED_MODELS,
    ModelCatalog,
    ModelInfo,
    declares_image_input,
)
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.llm.response import (
    MAX_ERROR_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_TOOL_CALLS,
    PROVIDER_MESSAGE_CHARS,
    ChatResult,
    ToolCall,
)
from deepseek_eyes.llm.sse import SSEDecoder
from deepseek_eyes.llm.stream import ChatStream

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_LISTED_MODELS",
    "MAX_RESPONSE_BYTES",
    "MAX_TOOL_CALLS",
    "PROVIDER_MESSAGE_CHARS",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "ModelCatalog",
    "ModelInfo",
    "SSEDecoder",
    "ToolCall",
    "declares_image_input",
]
