"""The OpenAI Responses wire format (``POST /v1/responses``): what Codex CLI speaks.

A request's ``input`` items are translated into an OpenAI ``chat/completions`` body
(:func:`openai_body`) and enter the one turn loop through
:func:`~deepseek_eyes.runtime.turn.wire.openai_chat.request_from_openai`, the one admission
path, so an ``input_image`` in a user message or inside a ``function_call_output`` becomes
the runtime's image part and the eyes decide whether the model gets its pixels or its
evidence. The answer goes back as a ``response`` object (:func:`response_json`, built from
the OpenAI completion the loop also keeps for idempotent replay) or as the Responses SSE
grammar (:class:`ResponseStream`, from the loop's own events).

Decisions a newcomer would otherwise undo:

* **Reasoning travels sealed, statelessly.** Every answer's ``reasoning`` item carries
  DeepSeek's reasoning inside ``encrypted_content``: AES-GCM under a key derived from the
  thinking keyring in the data directory, the asking scope bound as associated data
  (:class:`ReasoningSealer`). A blob that opens goes back to DeepSeek as the next assistant
  message's ``reasoning_content``; one that does not (foreign, altered, another key's) is
  dropped and the runtime's reasoning restore puts the stored text back from the asking
  scope's sessions, so Codex, which replays reasoning *only* as ``encrypted_content``, never
  meets DeepSeek's "missing reasoning_content" 400.
* **Tools DeepSeek can call, and only those:** ``function`` tools as they are;
  ``custom`` (freeform, e.g. ``apply_patch``) offered as a function taking one string
  ``input`` and mapped back to a ``custom_tool_call``; ``namespace`` tools flattened to
  ``<namespace>__<name>`` and mapped back with their ``namespace``; hosted tools we cannot
  run (``web_search``, ``file_search``, ...) dropped from what DeepSeek is offered and named
  once in the response's ``metadata`` (``deepseekeyes_dropped_tools``), never a 400.
* **Repaired, not refused:** ``reasoning.effort`` ``none``/``minimal`` turns thinking off;
  other efforts leave DeepSeek's default (it thinks); ``include``, ``prompt_cache_key``,
  ``client_metadata``, ``text``, ``truncation`` and ``service_tier`` are accepted and unused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import GatewayError
from deepseek_eyes.runtime.turn.events import Answer, Delta, Started, TurnEvent
from deepseek_eyes.runtime.turn.request import TurnResult
from deepseek_eyes.runtime.turn.wire.openai_chat import completion_json
from deepseek_eyes.store.keyring import Keyring, OpenedOnUse

if TYPE_CHECKING:  # cryptography (~6 MiB resident) loads with the first sealed reasoning
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KNOWN_FIELDS", "ReasoningSealer", "ResponseStream", "Translated", "failed_event",
    "openai_body", "response_events", "response_json", "usage_json",
]

#: The top-level fields of a Responses request the gateway reads; others are skipped.
KNOWN_FIELDS = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "stream", "store", "include", "reasoning", "previous_response_id", "prompt_cache_key",
    "max_output_tokens", "temperature", "top_p", "metadata", "text", "truncation", "user",
    "service_tier", "client_metadata", "stream_options",
})

_SEAL_PREFIX = "dse1r"
_SEAL_INFO = b"deepseekeyes.responses.reasoning-seal.v1"
_MAX_ITEMS = 10_000
_MAX_PARTS = 4096
_SUMMARY_CHARS = 280
_NAMESPACE_JOIN = "__"
_OFFERED = ("function", "custom", "namespace")
_THINKING_OFF = ("none", "minimal")


def _bad(message: str, param: str) -> GatewayError:
    return GatewayError(message, code="GATEWAY_BAD_REQUEST", details={"param": param})


class ReasoningSealer:
    """Seals DeepSeek's reasoning into a reasoning item's ``encrypted_content`` and opens
    it again: AES-GCM, the key derived (HMAC) from the active key of the thinking keyring,
    so rotation is the keyring's and nothing new is written to the data directory; the
    scope is associated data, so a blob minted for one gateway key opens for no other.
    ``keyring`` is the ring or how to open it (opened on first use)."""

    def __init__(self, keyring: Keyring | Callable[[], Keyring]) -> None:
        self._ring = OpenedOnUse(keyring)
        # The cipher of each ring key, derived once (a derivation and a cipher set-up per
        # answer were most of the Responses front's own cost); keyed by the key itself,
        # so a rotated ring derives its new key and an old blob still finds its own.
        self._ciphers: dict[bytes, AESGCM] = {}

    @property
    def keyring(self) -> Keyring:
        return self._ring.get()

    def _key(self, kid: str | None) -> tuple[str, AESGCM] | None:
        ring = self.keyring
        for key, key_id in zip(ring.keys, ring.ids(), strict=True):
            if kid is None or key_id == kid:
                cipher = self._ciphers.get(key)
                if cipher is None:
                    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

                    cipher = self._ciphers[key] = AESGCM(
                        hmac.new(key, _SEAL_INFO, hashlib.sha256).digest())
                return key_id, cipher
        return None

    def seal(self, reasoning: str, *, scope: str) -> str:
        found = self._key(None)
        assert found is not None
        kid, cipher = found
        nonce = os.urandom(12)
        plain = json.dumps({"r": reasoning}, ensure_ascii=False).encode("utf-8")
        sealed = cipher.encrypt(nonce, plain, scope.encode("utf-8"))
        blob = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{_SEAL_PREFIX}.{kid}.{blob}"

    def open(self, blob: Any, *, scope: str) -> str | None:
        """The reasoning sealed in ``blob`` for ``scope``, or None (foreign, altered, a key
        no longer on the ring, or not ours at all)."""
        if not isinstance(blob, str) or len(blob) > 8 * 1024 * 1024:
            return None
        parts = blob.split(".")
        if len(parts) != 3 or parts[0] != _SEAL_PREFIX:
            return None
        found = self._key(parts[1])
        if found is None:
            return None
        from cryptography.exceptions import InvalidTag  # loaded with the cipher

        try:
            raw = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
            plain = found[1].decrypt(raw[:12], raw[12:], scope.encode("utf-8"))
            value = json.loads(plain)
        except (ValueError, InvalidTag):
            return None
        text = value.get("r") if isinstance(value, dict) else None
        return text if isinstance(text, str) else None


@dataclass
class Translated:
    """A Responses request as an OpenAI body, and what the answer must honour."""

    body: JsonObject
    requested_model: str
    custom_tools: set[str] = field(default_factory=set)
    #: flattened name -> (namespace, name)
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    dropped_tools: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    summary: bool = False
    opened_reasoning: int = 0
    dropped_reasoning: int = 0
    store: bool = True
    previous_response_id: str | None = None
    echo: JsonObject = field(default_factory=dict)  # request fields a response repeats


def _text_parts(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where} must be a string or a list of content parts", where)
    texts = []
    for index, part in enumerate(content[:_MAX_PARTS]):
        if not isinstance(part, Mapping):
            raise _bad(f"{where}[{index}] must be an object", f"{where}[{index}]")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
    return "".join(texts)


def _image(part: Mapping[str, Any], at: str) -> JsonObject:
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        raise _bad(f"{at}.image_url must be a URL or a data: URL (file_id is not supported)",
                   f"{at}.image_url")
    image: JsonObject = {"url": url}
    if part.get("detail") in ("low", "high", "auto"):
        image["detail"] = part["detail"]
    return {"type": "image_url", "image_url": image}


def _parts(content: Any, where: str, translated: Translated) -> str | list[JsonObject]:
    """Input content (a string, or input_text/input_image/input_file parts) as OpenAI
    content: a plain string when it is text only."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where} must be a string or a list of content parts", where)
    parts: list[JsonObject] = []
    for index, part in enumerate(content[:_MAX_PARTS]):
        at = f"{where}[{index}]"
        if not isinstance(part, Mapping):
            raise _bad(f"{at} must be an object", at)
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            if not isinstance(part.get("text"), str):
                raise _bad(f"{at}.text must be a string", f"{at}.text")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            parts.append(_image(part, at))
        elif kind == "input_file":
            name = part.get("filename")
            label = name if isinstance(name, str) and name else "a file"
            parts.append({"type": "text",
                          "text": f"[{label} was attached in a format this gateway cannot read]"})
        else:
            translated.dropped.append(f"{at}:{str(kind)[:40]}")
    if all(p["type"] == "text" for p in parts):
        return "".join(str(p["text"]) for p in parts)
    return parts


def _tools(tools: Any, translated: Translated) -> list[JsonObject]:
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out: list[JsonObject] = []

    def function(tool: Mapping[str, Any], name: str) -> JsonObject:
        parameters = tool.get("parameters")
        spec: JsonObject = {"name": name, "parameters": parameters
                            if isinstance(parameters, Mapping)
                            else {"type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            spec["description"] = tool["description"]
        return {"type": "function", "function": spec}

    def named(tool: Mapping[str, Any], at: str) -> str:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"{at}.name must be a non-empty string", f"{at}.name")
        return name

    for index, tool in enumerate(tools):
        at = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            raise _bad(f"{at} must be an object", at)
        kind = tool.get("type")
        if kind not in _OFFERED:
            translated.dropped_tools.append(str(kind)[:40])
            continue
        name = named(tool, at)
        if kind == "function":
            out.append(function(tool, name))
        elif kind == "custom":
            translated.custom_tools.add(name)
            described = str(tool.get("description") or "")
            grammar = tool.get("format")
            if isinstance(grammar, Mapping) and isinstance(grammar.get("definition"), str):
                described += ("\nThe input follows this grammar "
                              f"({grammar.get('syntax', 'grammar')}):\n{grammar['definition']}")
            out.append({"type": "function", "function": {
                "name": name, "description": described.strip() or name,
                "parameters": {"type": "object", "required": ["input"], "properties": {
                    "input": {"type": "string", "description": "the raw input"}}}}})
        else:  # a namespace: its functions flattened, mapped back on the way out
            inner = tool.get("tools")
            if not isinstance(inner, list):
                raise _bad(f"{at}.tools must be a list", f"{at}.tools")
            for position, member in enumerate(inner):
                where = f"{at}.tools[{position}]"
                if not isinstance(member, Mapping) or member.get("type") != "function":
                    translated.dropped_tools.append(f"{name}:non-function")
                    continue
                member_name = named(member, where)
                flat = f"{name}{_NAMESPACE_JOIN}{member_name}"[:64]
                translated.namespaced[flat] = (name, member_name)
                out.append(function(member, flat))
    return out


def _tool_choice(choice: Any, body: JsonObject, translated: Translated) -> None:
    if choice is None:
        return
    if choice in ("auto", "none", "required"):
        body["tool_choice"] = choice
        return
    if isinstance(choice, Mapping) and choice.get("type") in ("function", "custom"):
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise _bad("tool_choice.name must be a string", "tool_choice.name")
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
        return
    if isinstance(choice, Mapping):  # allowed_tools, hosted tool choices: the model picks
        translated.dropped.append(f"tool_choice:{str(choice.get('type'))[:40]}")
        body["tool_choice"] = "auto"
        return
    raise _bad("tool_choice must be auto, none, required or a function", "tool_choice")


class _Builder:
    """Input items into OpenAI messages: consecutive reasoning, assistant text and calls
    join one assistant message, as the model produced them."""

    def __init__(self, translated: Translated, sealer: ReasoningSealer, scope: str) -> None:
        self.messages: list[JsonObject] = []
        self._open: JsonObject | None = None
        self._translated = translated
        self._sealer = sealer
        self._scope = scope

    def close(self) -> None:
        self._open = None

    def assistant(self, *, fresh: bool = False) -> JsonObject:
        current = self._open
        if current is None or fresh:
            current = {"role": "assistant", "content": ""}
            self.messages.append(current)
            self._open = current
        return current

    def reasoning(self, item: Mapping[str, Any]) -> None:
        current = self._open
        started = current is not None and (current.get("content") or current.get("tool_calls"))
        message = self.assistant(fresh=bool(started))
        text = self._sealer.open(item.get("encrypted_content"), scope=self._scope)
        if text is None:  # not ours or not there: the store restores it (module docstring)
            self._translated.dropped_reasoning += 1
            return
        self._translated.opened_reasoning += 1
        message["reasoning_content"] = str(message.get("reasoning_content") or "") + text

    def text(self, text: str) -> None:
        current = self._open
        fresh = current is not None and bool(current.get("tool_calls") or current["content"])
        message = self.assistant(fresh=fresh)
        message["content"] = text

    def call(self, call_id: str, name: str, arguments: str) -> None:
        message = self.assistant()
        message.setdefault("tool_calls", []).append(
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}})

    def add(self, message: JsonObject) -> None:
        self.close()
        self.messages.append(message)


def _call_id(item: Mapping[str, Any], at: str) -> str:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"{at}.call_id must be a non-empty string", f"{at}.call_id")
    return call_id


def _items(raw: Any, builder: _Builder, translated: Translated) -> None:
    if isinstance(raw, str):
        builder.add({"role": "user", "content": raw})
        return
    if not isinstance(raw, list):
        raise _bad("input must be a string or a list of items", "input")
    if len(raw) > _MAX_ITEMS:
        raise _bad(f"input holds more than {_MAX_ITEMS} items", "input")
    for index, item in enumerate(raw):
        at = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise _bad(f"{at} must be an object", at)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            where = f"{at}.content"
            if role in ("system", "developer"):
                builder.add({"role": "system", "content": _text_parts(item.get("content"),
                                                                      where)})
            elif role == "user":
                builder.add({"role": "user",
                             "content": _parts(item.get("content"), where, translated)})
            elif role == "assistant":
                builder.text(_text_parts(item.get("content"), where))
            else:
                raise _bad(f"{at}.role must be user, assistant, system or developer",
                           f"{at}.role")
        elif kind == "reasoning":
            builder.reasoning(item)
        elif kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise _bad(f"{at}.name must be a non-empty string", f"{at}.name")
            namespace = item.get("namespace")
            if isinstance(namespace, str) and namespace:
                name = f"{namespace}{_NAMESPACE_JOIN}{name}"[:64]
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise _bad(f"{at}.arguments must be a string", f"{at}.arguments")
            builder.call(_call_id(item, at), name, arguments)
        elif kind == "custom_tool_call":
            name, text = item.get("name"), item.get("input", "")
            if not isinstance(name, str) or not name or not isinstance(text, str):
                raise _bad(f"{at} needs a name and a string input", at)
            builder.call(_call_id(item, at), name,
                         json.dumps({"input": text}, ensure_ascii=False))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            content = _parts(output if output is not None else "", f"{at}.output", translated)
            builder.add({"role": "tool", "tool_call_id": _call_id(item, at),
                         "content": content})
        elif kind == "item_reference":
            raise _bad(f"{at}: item_reference is not supported; send the item, or "
                       "previous_response_id", f"{at}.type")
        else:  # hosted tools' calls and results, compaction summaries, ...: not for DeepSeek
            translated.dropped.append(f"{at}:{str(kind)[:40]}")


def _positive(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _bad(f"{name} must be a positive integer", name)
    return value


def openai_body(body: Mapping[str, Any], *, sealer: ReasoningSealer,
                scope: str) -> Translated:
    """A Responses request as an OpenAI ``chat/completions`` body.

    Raises:
        GatewayError: ``GATEWAY_BAD_REQUEST`` with ``details['param']``.
    """
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("model must be a non-empty string", "model")
    translated = Translated({}, model)
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise _bad("previous_response_id must be a string", "previous_response_id")
    translated.previous_response_id = previous
    translated.store = body.get("store") is not False
    builder = _Builder(translated, sealer, scope)
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _bad("instructions must be a string", "instructions")
        if instructions:
            builder.add({"role": "system", "content": instructions})
    if body.get("input") is None and previous is None:
        raise _bad("input is required", "input")
    if body.get("input") is not None:
        _items(body["input"], builder, translated)
    if not builder.messages:
        raise _bad("input holds no message DeepSeek can read", "input")
    out: JsonObject = {"model": model.strip(), "messages": builder.messages}
    max_tokens = _positive(body, "max_output_tokens")
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = value
    if body.get("stream") is True:
        out["stream"] = True
    if isinstance(body.get("parallel_tool_calls"), bool):
        out["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("tools") is not None:
        tools = _tools(body["tools"], translated)
        if tools:
            out["tools"] = tools
    _tool_choice(body.get("tool_choice"), out, translated)
    if "tools" not in out:
        out.pop("tool_choice", None)
        out.pop("parallel_tool_calls", None)
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, Mapping):
        raise _bad("reasoning must be an object", "reasoning")
    if isinstance(reasoning, Mapping):
        if reasoning.get("effort") in _THINKING_OFF:
            out["thinking"] = {"type": "disabled"}
        translated.summary = reasoning.get("summary") in ("auto", "concise", "detailed")
    metadata = body.get("metadata")
    translated.echo = {
        "instructions": instructions if isinstance(instructions, str) else None,
        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": list(body.get("tools") or []),
        "temperature": out.get("temperature"),
        "top_p": out.get("top_p"),
        "max_output_tokens": max_tokens,
        "previous_response_id": previous,
        "store": translated.store,
        "reasoning": dict(reasoning) if isinstance(reasoning, Mapping) else None,
    }
    translated.body = out
    return translated


# -- answers ----------------------------------------------------------------------------


def usage_json(usage: Any) -> JsonObject:
    """OpenAI chat usage in the Responses shape."""
    get = usage.get if isinstance(usage, Mapping) else (lambda _k, _d=None: None)
    prompt = int(get("prompt_tokens", 0) or 0)
    output = int(get("completion_tokens", 0) or 0)
    cached = int(get("prompt_cache_hit_tokens", 0) or 0)
    details = get("completion_tokens_details")
    reasoning = int(details.get("reasoning_tokens", 0) or 0) \
        if isinstance(details, Mapping) else 0
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + output}


def summary_of(reasoning: str) -> str:
    """A short readable summary of DeepSeek's reasoning: its first paragraph, bounded."""
    first = reasoning.strip().split("\n\n", 1)[0].strip()
    return first if len(first) <= _SUMMARY_CHARS else first[:_SUMMARY_CHARS - 1] + "…"


def _reasoning_item(item_id: str, reasoning: str, translated: Translated,
                    sealer: ReasoningSealer, scope: str) -> JsonObject:
    summary = ([{"type": "summary_text", "text": summary_of(reasoning)}]
               if translated.summary else [])
    return {"type": "reasoning", "id": item_id, "summary": summary,
            "encrypted_content": sealer.seal(reasoning, scope=scope)}


def _message_item(item_id: str, text: str) -> JsonObject:
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _call_item(call_id: str, name: str, arguments: str,
               translated: Translated) -> JsonObject:
    if name in translated.custom_tools:
        try:
            value = json.loads(arguments) if arguments else {}
        except ValueError:
            value = {}
        text = value.get("input") if isinstance(value, dict) else None
        return {"type": "custom_tool_call", "id": f"ctc_{call_id}", "call_id": call_id,
                "name": name, "input": text if isinstance(text, str) else arguments,
                "status": "completed"}
    item: JsonObject = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                        "name": name, "arguments": arguments, "status": "completed"}
    if name in translated.namespaced:
        item["namespace"], item["name"] = translated.namespaced[name]
    return item


def _envelope(response_id: str, created: int, translated: Translated, status: str,
              output: list[JsonObject], usage: JsonObject | None,
              incomplete: str | None = None) -> JsonObject:
    metadata = dict(translated.echo.get("metadata") or {})
    if translated.dropped_tools:
        metadata["deepseekeyes_dropped_tools"] = ",".join(
            sorted(set(translated.dropped_tools)))[:512]
    return {
        "id": response_id, "object": "response", "created_at": created, "status": status,
        "model": translated.requested_model, "output": output,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "usage": usage,
        **{k: v for k, v in translated.echo.items() if k != "metadata"},
        "metadata": metadata,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
    }


def response_json(completion: Mapping[str, Any], translated: Translated, *,
                  sealer: ReasoningSealer, scope: str) -> JsonObject:
    """An OpenAI ``chat.completion`` (as the loop answers and keeps it) as a ``response``:
    reasoning first, then the message, then the calls."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = str(completion.get("id", "")).removeprefix("chatcmpl-")
    output: list[JsonObject] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        output.append(_reasoning_item(f"rs_{base}", reasoning, translated, sealer, scope))
    text = message.get("content")
    if isinstance(text, str) and text:
        output.append(_message_item(f"msg_{base}", text))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        output.append(_call_item(call["id"], function["name"],
                                 function.get("arguments", ""), translated))
    incomplete = "max_output_tokens" if choice.get("finish_reason") == "length" else (
        "content_filter" if choice.get("finish_reason") == "content_filter" else None)
    out = _envelope(f"resp_{base}", int(completion.get("created") or time.time()),
                    translated, "incomplete" if incomplete else "completed", output,
                    usage_json(completion.get("usage")), incomplete)
    if isinstance(completion.get("deepseekeyes"), Mapping):
        out["deepseekeyes"] = completion["deepseekeyes"]
    return out


def answer_json(result: TurnResult, translated: Translated, *, sealer: ReasoningSealer,
                scope: str) -> JsonObject:
    return response_json(completion_json(result), translated, sealer=sealer, scope=scope)


Event = tuple[str, JsonObject]


class _Sequencer:
    def __init__(self) -> None:
        self.number = 0

    def __call__(self, kind: str, data: JsonObject) -> Event:
        event = (kind, {"type": kind, "sequence_number": self.number, **data})
        self.number += 1
        return event


def _item_events(emit: _Sequencer, index: int, item: JsonObject) -> list[Event]:
    """One finished output item as the events that add, fill and finish it."""
    kind = item["type"]
    item_id = item["id"]
    out: list[Event] = []
    if kind == "message":
        out.append(emit("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "content": []}}))
        text = item["content"][0]["text"]
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": []}
        out.append(emit("response.content_part.added", {**where, "part": empty}))
        out.append(emit("response.output_text.delta", {**where, "delta": text,
                                                       "logprobs": []}))
        out.append(emit("response.output_text.done", {**where, "text": text,
                                                      "logprobs": []}))
        out.append(emit("response.content_part.done", {**where,
                                                       "part": item["content"][0]}))
    elif kind == "reasoning":
        out.append(emit("response.output_item.added", {"output_index": index, "item": {
            "type": "reasoning", "id": item_id, "summary": []}}))
        out += _summary_events(emit, index, item)
    elif kind == "function_call":
        out.append(emit("response.output_item.added", {"output_index": index, "item": {
            **item, "arguments": "", "status": "in_progress"}}))
        where = {"item_id": item_id, "output_index": index}
        out.append(emit("response.function_call_arguments.delta",
                        {**where, "delta": item["arguments"]}))
        out.append(emit("response.function_call_arguments.done",
                        {**where, "name": item["name"], "arguments": item["arguments"]}))
    else:  # custom_tool_call
        out.append(emit("response.output_item.added", {"output_index": index, "item": {
            **item, "input": "", "status": "in_progress"}}))
        where = {"item_id": item_id, "output_index": index}
        out.append(emit("response.custom_tool_call_input.delta",
                        {**where, "delta": item["input"]}))
        out.append(emit("response.custom_tool_call_input.done",
                        {**where, "input": item["input"]}))
    out.append(emit("response.output_item.done", {"output_index": index, "item": item}))
    return out


def _summary_events(emit: _Sequencer, index: int, item: JsonObject) -> list[Event]:
    out: list[Event] = []
    for position, part in enumerate(item["summary"]):
        where = {"item_id": item["id"], "output_index": index, "summary_index": position}
        out.append(emit("response.reasoning_summary_part.added",
                        {**where, "part": {"type": "summary_text", "text": ""}}))
        out.append(emit("response.reasoning_summary_text.delta",
                        {**where, "delta": part["text"]}))
        out.append(emit("response.reasoning_summary_text.done",
                        {**where, "text": part["text"]}))
        out.append(emit("response.reasoning_summary_part.done", {**where, "part": part}))
    return out


def _closing(emit: _Sequencer, response: JsonObject) -> list[Event]:
    kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    return [emit(kind, {"response": response})]


def response_events(response: JsonObject) -> list[Event]:
    """A whole ``response`` as the events of a stream (a stored answer replayed to a client
    that asked for a stream)."""
    emit = _Sequencer()
    head = {**response, "status": "in_progress", "output": [], "usage": None}
    head.pop("deepseekeyes", None)
    out = [emit("response.created", {"response": head}),
           emit("response.in_progress", {"response": head})]
    for index, item in enumerate(response["output"]):
        out += _item_events(emit, index, item)
    return out + _closing(emit, response)


def failed_event(sequence: int, response_id: str, model: str, code: str,
                 message: str) -> Event:
    """``response.failed``: how a stream that already started reports a failure."""
    return ("response.failed", {
        "type": "response.failed", "sequence_number": sequence,
        "response": {"id": response_id, "object": "response", "created_at": int(time.time()),
                     "status": "failed", "model": model, "output": [],
                     "error": {"code": code, "message": message},
                     "incomplete_details": None, "usage": None}})


class ResponseStream:
    """The loop's events as the Responses SSE grammar, ``(event name, data)``:
    ``response.created`` and ``response.in_progress`` once the turn started; each output
    item added, filled by its deltas and done in turn (reasoning, message, calls: a
    reasoning item ends with its summary and sealed content); ``response.completed`` (or
    ``response.incomplete``) with the whole response. ``sequence_number`` increases by
    one. ``result`` is set at the end."""

    def __init__(self, events: AsyncGenerator[TurnEvent, None], translated: Translated, *,
                 sealer: ReasoningSealer, scope: str) -> None:
        self._events = events
        self._translated = translated
        self._sealer = sealer
        self._scope = scope
        self.session_id: str | None = None
        self.result: TurnResult | None = None
        self.response_id = f"resp_{uuid.uuid4().hex}"
        self.emit = _Sequencer()
        self._created = int(time.time())
        self._output: list[JsonObject] = []
        self._open: str | None = None  # "reasoning", "message", "call"
        self._buffer: list[str] = []
        self._call: JsonObject | None = None
        self._calls: dict[int, int] = {}  # the OpenAI call index -> output index

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    def _head(self) -> JsonObject:
        return _envelope(self.response_id, self._created, self._translated, "in_progress",
                         [], None)

    def _index(self) -> int:
        return len(self._output)

    def _stop(self) -> list[Event]:
        out: list[Event] = []
        index = self._index()
        if self._open == "reasoning":
            item = _reasoning_item(f"rs_{uuid.uuid4().hex}", "".join(self._buffer),
                                   self._translated, self._sealer, self._scope)
            item["id"] = self._reasoning_id
            out += _summary_events(self.emit, index, item)
            out.append(self.emit("response.output_item.done",
                                 {"output_index": index, "item": item}))
            self._output.append(item)
        elif self._open == "message":
            text = "".join(self._buffer)
            item = _message_item(self._message_id, text)
            where = {"item_id": self._message_id, "output_index": index, "content_index": 0}
            out.append(self.emit("response.output_text.done", {**where, "text": text,
                                                               "logprobs": []}))
            out.append(self.emit("response.content_part.done",
                                 {**where, "part": item["content"][0]}))
            out.append(self.emit("response.output_item.done",
                                 {"output_index": index, "item": item}))
            self._output.append(item)
        elif self._open == "call":
            assert self._call is not None
            item = _call_item(self._call["id"], self._call["name"], "".join(self._buffer),
                              self._translated)
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "custom_tool_call":
                out.append(self.emit("response.custom_tool_call_input.delta",
                                     {**where, "delta": item["input"]}))
                out.append(self.emit("response.custom_tool_call_input.done",
                                     {**where, "input": item["input"]}))
            else:
                out.append(self.emit("response.function_call_arguments.done",
                                     {**where, "name": item["name"],
                                      "arguments": item["arguments"]}))
            out.append(self.emit("response.output_item.done",
                                 {"output_index": index, "item": item}))
            self._output.append(item)
            self._call = None
        self._open = None
        self._buffer = []
        return out

    def _on_delta(self, delta: Mapping[str, Any]) -> list[Event]:
        out: list[Event] = []
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            if self._open != "reasoning":
                out += self._stop()
                self._open = "reasoning"
                self._reasoning_id = f"rs_{uuid.uuid4().hex}"
                out.append(self.emit("response.output_item.added", {
                    "output_index": self._index(),
                    "item": {"type": "reasoning", "id": self._reasoning_id, "summary": []}}))
            self._buffer.append(reasoning)
        text = delta.get("content")
        if isinstance(text, str) and text:
            where = {"output_index": self._index(), "content_index": 0}
            if self._open != "message":
                out += self._stop()
                self._open = "message"
                self._message_id = f"msg_{uuid.uuid4().hex}"
                where = {"output_index": self._index(), "content_index": 0}
                out.append(self.emit("response.output_item.added", {
                    "output_index": self._index(), "item": {
                        "type": "message", "id": self._message_id, "status": "in_progress",
                        "role": "assistant", "content": []}}))
                out.append(self.emit("response.content_part.added", {
                    "item_id": self._message_id, **where,
                    "part": {"type": "output_text", "text": "", "annotations": []}}))
            self._buffer.append(text)
            out.append(self.emit("response.output_text.delta", {
                "item_id": self._message_id, **where, "delta": text, "logprobs": []}))
        for call in delta.get("tool_calls") or ():
            out += self._on_call(call)
        return out

    def _on_call(self, call: Mapping[str, Any]) -> list[Event]:
        out: list[Event] = []
        position = int(call.get("index", 0))
        function = call.get("function") or {}
        if position not in self._calls:
            out += self._stop()
            name = str(function.get("name") or "")
            call_id = str(call.get("id") or f"call_{uuid.uuid4().hex}")
            self._open = "call"
            self._call = {"id": call_id, "name": name}
            self._calls[position] = self._index()
            shell = _call_item(call_id, name, "", self._translated)
            out.append(self.emit("response.output_item.added", {
                "output_index": self._index(), "item": {**shell, "status": "in_progress"}}))
        elif self._calls[position] != self._index() or self._open != "call":
            return out  # deltas of an earlier call: not ours to reorder
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._buffer.append(arguments)
            assert self._call is not None
            if self._call["name"] not in self._translated.custom_tools:
                out.append(self.emit("response.function_call_arguments.delta", {
                    "item_id": f"fc_{self._call['id']}", "output_index": self._index(),
                    "delta": arguments}))
        return out

    async def _iterate(self) -> AsyncIterator[Event]:
        try:
            async for event in self._events:
                if isinstance(event, Started):
                    self.session_id = event.session_id
                    self._created = event.created
                    head = self._head()
                    yield self.emit("response.created", {"response": head})
                    yield self.emit("response.in_progress", {"response": head})
                elif isinstance(event, Delta):
                    for item in self._on_delta(event.delta):
                        yield item
                elif isinstance(event, Answer):
                    final = event.result
                    for i, call in enumerate(event.late):
                        for item in self._on_call({
                                "index": event.relayed + i, "id": call.id,
                                "function": {"name": call.name, "arguments": call.arguments}}):
                            yield item
                    for item in self._stop():
                        yield item
                    finish = final.finish_reason
                    incomplete = "max_output_tokens" if finish == "length" else (
                        "content_filter" if finish == "content_filter" else None)
                    response = _envelope(
                        self.response_id, self._created, self._translated,
                        "incomplete" if incomplete else "completed", self._output,
                        usage_json(completion_json(final)["usage"]), incomplete)
                    for item in _closing(self.emit, response):
                        yield item
                    self.result = final
        finally:
            await self._events.aclose()
