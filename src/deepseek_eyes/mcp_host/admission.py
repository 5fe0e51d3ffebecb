"""Hard admission of a tool result before anything of ours touches it.

The walk is iterative (an explicit stack) and stops at the first limit crossed, so an
over-limit result is refused in time proportional to the limit, not to the input: string
and base64 lengths are read, never scanned. Image data strings are charged to the image
budgets instead of the string budget. Admission has no side effects; persisting happens
only after it passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from deepseek_eyes.errors import McpResultError

__all__ = ["LIMITS", "AdmissionLimits", "Admitted", "admit"]


@dataclass(frozen=True)
class AdmissionLimits:
    depth: int = 64
    values: int = 50_000
    blocks: int = 4096
    string_chars: int = 16 * 1024 * 1024
    images: int = 8
    image_encoded: int = 28 * 1024 * 1024
    image_decoded: int = 20 * 1024 * 1024
    raw_bytes: int = 20 * 1024 * 1024


LIMITS = AdmissionLimits()

#: Built once here: ``list | tuple`` written in the ``isinstance`` call was a new union for
#: every value the walk visits.
_SEQUENCE = (list, tuple)
_RAW = (bytes, bytearray, memoryview)


class Admitted(NamedTuple):  # one per call: a tuple is built ~10x quicker than a frozen class
    values: int
    blocks: int
    string_chars: int
    images: int
    image_encoded: int
    image_decoded: int
    raw_bytes: int


def _fail(code: str, what: str, cap: int) -> McpResultError:
    return McpResultError(
        f"the result exceeds the {what} limit ({cap:,})", code=code,
        details={"limit": what, "cap": cap},
    )


def _decoded_len(data: str) -> int:
    n = len(data)
    pad = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    return n * 3 // 4 - pad


def admit(value: Any, limits: AdmissionLimits = LIMITS) -> Admitted:
    """Check ``value`` (the result as JSON data) against every limit.

    Raises:
        McpResultError: the ``MCP_RESULT_*_LIMIT`` code of the first limit crossed.
    """
    values = chars = images = enc = dec = raw = 0
    # Read once: these three are checked at every value the walk visits.
    max_values, max_depth, max_chars = limits.values, limits.depth, limits.string_chars
    content = value.get("content") if isinstance(value, dict) else None
    blocks = len(content) if isinstance(content, list) else 0
    if blocks > limits.blocks:
        raise _fail("MCP_RESULT_BLOCKS_LIMIT", "content blocks", limits.blocks)
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        values += 1
        if values > max_values:
            raise _fail("MCP_RESULT_VALUES_LIMIT", "values", max_values)
        if depth > max_depth:
            raise _fail("MCP_RESULT_DEPTH_LIMIT", "depth", max_depth)
        if isinstance(item, str):
            chars += len(item)
            if chars > max_chars:
                raise _fail("MCP_RESULT_STRING_LIMIT", "string characters", max_chars)
        elif isinstance(item, dict):
            if len(item) + values > max_values:
                raise _fail("MCP_RESULT_VALUES_LIMIT", "values", max_values)
            image_data = item.get("data") if item.get("type") == "image" else None
            # A resource's binary contents travel as base64 text; they are bytes, and count
            # against the bytes limit at their decoded size, not as 16 Mi of characters.
            blob = item.get("blob") if "uri" in item else None
            child_depth = depth + 1
            for key, child in item.items():
                chars += len(key) if isinstance(key, str) else 0
                # Identity first: it is false for almost every child, and cheapest.
                if child is blob and key == "blob" and isinstance(blob, str):
                    values += 1
                    raw += _decoded_len(blob)
                    if raw > limits.raw_bytes:
                        raise _fail("MCP_RESULT_BYTES_LIMIT", "raw bytes", limits.raw_bytes)
                elif child is image_data and key == "data" and isinstance(image_data, str):
                    images += 1
                    enc += len(image_data)
                    dec += _decoded_len(image_data)
                    values += 1
                    if images > limits.images:
                        raise _fail("MCP_RESULT_IMAGE_COUNT_LIMIT", "image count", limits.images)
                    if enc > limits.image_encoded:
                        raise _fail("MCP_RESULT_IMAGE_ENCODED_LIMIT", "encoded image bytes",
                                    limits.image_encoded)
                    if dec > limits.image_decoded:
                        raise _fail("MCP_RESULT_IMAGE_DECODED_LIMIT", "decoded image bytes",
                                    limits.image_decoded)
                else:
                    stack.append((child, child_depth))
            if chars > max_chars:
                raise _fail("MCP_RESULT_STRING_LIMIT", "string characters", max_chars)
        elif isinstance(item, _SEQUENCE):
            if len(item) + values > max_values:
                raise _fail("MCP_RESULT_VALUES_LIMIT", "values", max_values)
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, _RAW):
            raw += len(item)
            if raw > limits.raw_bytes:
                raise _fail("MCP_RESULT_BYTES_LIMIT", "raw bytes", limits.raw_bytes)
    return Admitted(values, blocks, chars, images, enc, dec, raw)
