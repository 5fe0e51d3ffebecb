"""The one layer that speaks HTTP to model endpoints (OpenAI-compatible chat, streaming, usage).

Everything above it imports from here, never ``httpx`` itself (ruff's banned-API list
enforces that), so transport failures always surface as :class:`~deepseek_eyes.errors.LLMError`
with a stable ``LLM_*`` code.
"""

from deepseek_eyes.llm.client import (
    MAX_ERROR_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    ChatClient,
    ChatResult,
)
from deepseek_eyes.llm.sse import SSEDecoder

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "ChatClient",
    "ChatResult",
    "SSEDecoder",
]
