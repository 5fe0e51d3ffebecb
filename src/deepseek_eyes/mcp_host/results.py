"""What an admitted result becomes: a canonical hash, a bounded preview, an artifact, images.

* The hash is SHA-256 over canonical JSON (sorted keys, no spaces, every non-ASCII
  character escaped as ``\\uXXXX``), so the same result hashes the same on every host and
  in every audit row. Escaping makes the bytes plain ASCII (so valid UTF-8, and a lone
  surrogate from a server needs no special encoding), and it is about twice as fast as
  ``ensure_ascii=False`` in CPython's encoder: admission + canonicalization + hash of a
  16 MiB result stay near a bare ``json.dumps`` + SHA-256 (bench/mcp_admission.py).
* The preview is what enters the model's context, bounded by ``mcp.max_result_chars``.
  When it had to be cut, or the result carries more than text, the complete canonical
  JSON is kept as an immutable private artifact (temp file, fsync, atomic rename, the temp
  file removed on every exit), so nothing that reached the model is untraceable. A cut is
  never silent: the preview ends with :func:`truncation_marker` (how many characters are
  missing, and the artifact's digest, or that ``mcp.persist_results = false`` kept none),
  and the marker's room is taken from the text, so the whole still fits the bound.
* Image blocks are decoded and validated as one batch before the first blob is written;
  a bad image stores none, and a storage fault returns no partial list. The runtime hands
  the returned blob references to the vision bridge.
* A full disk is the store's ``STORE_FULL``, not ``MCP_RESULT_PERSIST_FAILED``: it is no
  fault of the server's result, and it says what to do (free space) wherever it strikes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepseek_eyes import canonical_json as _formats
from deepseek_eyes.errors import McpResultError, StoreError
from deepseek_eyes.store.blobs import BlobRef, BlobStore
from deepseek_eyes.store.files import write_file_atomic

__all__ = [
    "MARKER_CHARS",
    "ImageRef",
    "canonical_json",
    "decode_images",
    "preview_text",
    "store_images",
    "truncation_marker",
    "write_artifact",
]

_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


@dataclass(frozen=True)
class ImageRef:
    blob: BlobRef
    mime_type: str


def canonical_json(value: Any) -> tuple[bytes, str]:
    """Canonical (ASCII, hence UTF-8) JSON of ``value`` and its ``sha256:`` digest."""
    data = _formats.ASCII.dumps_bytes(value)
    return data, "sha256:" + hashlib.sha256(data).hexdigest()


def decode_images(value: Any) -> list[tuple[bytes, str]]:
    """Decode and check every top-level image block; all pass or none is returned.

    Raises:
        McpResultError: ``MCP_RESULT_IMAGE_INVALID`` naming the first bad block.
    """
    out: list[tuple[bytes, str]] = []
    content = value.get("content") if isinstance(value, dict) else None
    for index, block in enumerate(content if isinstance(content, list) else ()):
        if not (isinstance(block, dict) and block.get("type") == "image"):
            continue
        mime = str(block.get("mimeType", "")).lower()
        try:
            data = base64.b64decode(block.get("data", ""), validate=True)
        except (binascii.Error, ValueError, TypeError):
            data = b""
        magics = _MAGIC.get(mime, ())
        if not data or not any(data.startswith(m) for m in magics) or (
            mime == "image/webp" and data[8:12] != b"WEBP"
        ):
            raise McpResultError(
                f"image block {index} is not valid base64 of a {mime or 'known'} image",
                code="MCP_RESULT_IMAGE_INVALID", details={"block": index, "mime_type": mime},
            )
        out.append((data, mime))
    return out


def store_images(blobs: BlobStore, images: list[tuple[bytes, str]]) -> list[ImageRef]:
    """Write an already validated batch; a storage fault returns nothing.

    Raises:
        McpResultError: ``MCP_RESULT_PERSIST_FAILED``.
        StoreError: ``STORE_FULL``.
    """
    refs: list[ImageRef] = []
    try:
        for data, mime in images:
            refs.append(ImageRef(blobs.put(data), mime))
    except StoreError as exc:
        if exc.code == "STORE_FULL":
            raise
        raise McpResultError(
            "the result's images could not be stored", code="MCP_RESULT_PERSIST_FAILED",
            details={"stored_before_fault": len(refs)},
        ) from exc
    return refs


def write_artifact(root: Path, data: bytes, digest: str) -> Path:
    """Store canonical JSON at ``root/<hex[:2]>/<hex>.json``, read-only, atomically.

    Raises:
        McpResultError: ``MCP_RESULT_PERSIST_FAILED``; the temp file never survives.
        StoreError: ``STORE_FULL``.
    """
    hex_digest = digest.removeprefix("sha256:")
    target = root / hex_digest[:2] / f"{hex_digest}.json"
    if target.is_file():
        return target
    try:
        write_file_atomic(target, data, mode=0o400, dir_mode=0o700)
    except StoreError as exc:
        if exc.code == "STORE_FULL":
            raise
        raise McpResultError(
            f"the result artifact could not be written: {exc.message}",
            code="MCP_RESULT_PERSIST_FAILED",
        ) from exc
    return target


def truncation_marker(left_out: int, total: int, artifact: str | None) -> str:
    """The line that ends a cut preview: how much of it is missing and where it is kept
    (``artifact``: the complete result's digest; None: it was not kept)."""
    where = (f"the whole result is kept as artifact {artifact}" if artifact is not None
             else "the rest was not kept (mcp.persist_results = false)")
    return f"\n[truncated: {left_out:,} of {total:,} characters left out; {where}]"


#: Room the marker may take: its words, two counts and a ``sha256:`` digest.
MARKER_CHARS = 192


def preview_text(value: Any, images: list[ImageRef], limit: int) -> tuple[str, int, bool]:
    """(preview, total, text_only): text blocks joined; other blocks as short markers (an
    embedded resource's text follows its marker); a prompt message's role leads it.

    ``total`` is the length the whole preview would have; only ``limit`` characters of it
    are built, so a preview shorter than ``total`` was cut. Every block is measured, which
    costs one length a block: admission has bounded how many there are.
    """
    parts: list[str] = []
    text_only = True
    content = value.get("content") if isinstance(value, dict) else None
    image_iter = iter(images)
    size = 0
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        body = ""  # a resource's text, measured without being copied once past the limit
        if kind == "text":
            part = str(block.get("text", ""))
        elif kind == "image":
            text_only = False
            ref = next(image_iter, None)
            part = f"[image {ref.blob.uri} {ref.mime_type}]" if ref else "[image]"
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            # An embedded resource: its text is content the model should read.
            text_only = False
            resource = block["resource"]
            part = f"[resource {resource.get('uri', '')}]".replace(" ]", "]")
            if isinstance(resource.get("text"), str):
                body = "\n" + resource["text"]
        else:
            text_only = False
            part = f"[{kind or 'block'}]"
        role = block.get("role") if isinstance(block, dict) else None
        if isinstance(role, str):  # a prompt message (see content.as_content)
            part = f"[{role}] {part}"
        if size <= limit:
            parts.append(part + body)
        size += len(part) + len(body) + 1
    if isinstance(value, dict) and value.get("structuredContent") is not None:
        text_only = False
        if not parts:
            whole = json.dumps(value["structuredContent"], ensure_ascii=False)
            parts.append(whole[: limit + 1])
            size = len(whole) + 1
    total = max(size - 1, 0)
    text = "\n".join(parts)
    return (text[:limit] if len(text) > limit else text), total, text_only
