"""The Anthropic Messages wire format (``POST /v1/messages``): what Claude Code speaks.

A request is translated into an OpenAI ``chat/completions`` body (:func:`openai_body`) and
enters the turn loop through :func:`~deepseek_eyes.runtime.turn.wire.openai_chat.
request_from_openai`, the one admission path, so an Anthropic ``image`` block, in a user
message or inside a ``tool_result``, becomes the runtime's image part and the eyes decide
whether the model gets its pixels or its evidence. The answer goes back as a ``message``
(:func:`message_json`, built from the OpenAI completion the loop also keeps for
idempotent replay) or as Anthropic's SSE events (:class:`MessageStream`, from the loop's
own events).

Decisions a newcomer would otherwise undo:

* **Repaired, not refused,** where DeepSeek is stricter than Anthropic: ``thinking:
  disabled`` with an effort drops the effort (DeepSeek refuses the pair, Claude Code's
  subagents send it); ``tool_choice`` ``any`` becomes ``required`` and ``{type: tool}`` a
  named function (DeepSeek's Anthropic endpoint reads ``any`` as ``auto``); a forced tool
  the model still did not call is an error (``RUNTIME_TOOL_NOT_CALLED``), never a silent
  wrong turn. ``cache_control``, ``metadata``, ``top_k``, unknown betas and hosted tools
  we cannot run are accepted and dropped; ``defer_loading`` tools are simply offered.
* **Thinking blocks carry our own signature:** an HMAC (a keyring in the data directory)
  over the scope, the message id and the text. A block whose signature verifies goes back
  to DeepSeek as that message's ``reasoning_content``; a missing, foreign or altered one is
  dropped, and the runtime's reasoning restore puts the stored text back from the asking
  scope's sessions (:mod:`deepseek_eyes.runtime.reasoning`), so DeepSeek never sees a
  broken exchange and a client never a 400 for it.
* **Model names:** ``claude-*`` names map to DeepSeek models by ``gateway.claude_models``
  (patterns, first match wins); a ``[1m]`` suffix is dropped; the answer echoes the name
  the client asked for.
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError, TurnError
from deepseek_eyes.runtime.turn.events import Answer, Delta, Started, TurnEvent
from deepseek_eyes.runtime.turn.request import TurnResult
from deepseek_eyes.runtime.turn.wire.openai_chat import completion_json
from deepseek_eyes.store.keyring import Keyring, KeyringKind, OpenedOnUse
from deepseek_eyes.usage import estimate_tokens

__all__ = [
    "DEFAULT_CLAUDE_MODELS", "KNOWN_FIELDS", "MessageStream", "ThinkingKeyring",
    "ThinkingSigner", "Translated", "count_tokens", "error_json", "error_type",
    "message_events", "message_json", "openai_body", "upstream_model",
]

#: ``claude-*`` names as DeepSeek's own Anthropic endpoint maps them; first match wins.
DEFAULT_CLAUDE_MODELS: dict[str, str] = {
    "claude-opus*": "deepseek-v4-pro",
    "claude*": "deepseek-flash",
}

#: The top-level fields of a Messages request the gateway reads; others are skipped.
KNOWN_FIELDS = frozenset({
    "model", "messages", "system", "max_tokens", "stop_sequences", "stream", "temperature",
    "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config", "metadata",
})

THINKING_KEYS = KeyringKind(
    domain=b"deepseek-eyes thinking signature key",
    label="the thinking-signature keyring",
    signs="thinking-block signatures",
    error=TurnError,
    invalid="RUNTIME_THINKING_KEYRING_INVALID",
    exposed="RUNTIME_THINKING_KEYRING_EXPOSED",
    unknown="RUNTIME_THINKING_KEY_UNKNOWN",
)

_SIGNATURE_PREFIX = "dse1"
_MAX_BLOCKS = 4096  # content blocks of one message
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens",
         "content_filter": "refusal"}
_OFFERED_TYPES = (None, "custom")  # client tools; any other type is a hosted tool


class ThinkingKeyring(Keyring):
    """``<data home>/thinking/keyring.json``: the key thinking signatures are made with."""

    kind = THINKING_KEYS


def thinking_directory(home_root: Path) -> Path:
    return home_root / "thinking"


class ThinkingSigner:
    """Mints and checks the ``signature`` of a thinking block: bound to the scope that was
    answered, the message and the text, so a block another key's client was given, or one
    edited, does not verify. ``keyring`` is the ring, or how to open it: then it is opened
    (created on first use) when a signature is first made or checked, so a gateway that
    never serves ``/v1/messages`` never writes one."""

    def __init__(self, keyring: Keyring | Callable[[], Keyring]) -> None:
        self._ring = OpenedOnUse(keyring)

    @property
    def keyring(self) -> Keyring:
        return self._ring.get()

    @staticmethod
    def _data(scope: str, message_id: str, text: str) -> bytes:
        # A JSON array: unambiguous field boundaries, whatever the text holds.
        return json.dumps(["deepseekeyes.thinking.v1", scope, message_id, text],
                          ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def mint(self, text: str, *, scope: str, message_id: str) -> str:
        kid, mac = self.keyring.sign(self._data(scope, message_id, text))
        return f"{_SIGNATURE_PREFIX}.{message_id}.{kid}.{mac}"

    def verify(self, text: str, signature: Any, *, scope: str) -> bool:
        if not isinstance(signature, str) or len(signature) > 512:
            return False
        parts = signature.split(".")
        if len(parts) != 4 or parts[0] != _SIGNATURE_PREFIX:
            return False
        _, message_id, kid, mac = parts
        try:
            return self.keyring.verify(self._data(scope, message_id, text), kid, mac)
        except DeepSeekEyesError:  # a key not on the ring: foreign, like any other
            return False


def upstream_model(requested: str, claude_models: Mapping[str, str]) -> str:
    """The DeepSeek model a requested name stands for (``[1m]`` dropped; ``claude-*`` by
    the first matching pattern of ``claude_models``; any other name as it is)."""
    name = requested.strip()
    if name.lower().endswith("[1m]"):
        name = name[:-4]
    lowered = name.lower()
    if lowered.startswith("claude"):
        for pattern, target in claude_models.items():
            if fnmatch.fnmatchcase(lowered, pattern.lower()):
                return target
    return name


def _bad(message: str, param: str) -> GatewayError:
    return GatewayError(message, code="GATEWAY_BAD_REQUEST", details={"param": param})


@dataclass
class Translated:
    """A Messages request as an OpenAI body, and what the answer must honour."""

    body: JsonObject
    requested_model: str
    #: ``"any"`` or a tool's name when the request forces a tool call; None otherwise.
    forced_tool: str | None = None
    dropped: list[str] = field(default_factory=list)  # what was accepted and not used
    verified_thinking: int = 0
    dropped_thinking: int = 0


def _text_of_blocks(value: Any, where: str) -> str:
    """``system`` or a text-only content: a string or a list of text blocks."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _bad(f"{where} must be a string or a list of text blocks", where)
    texts = []
    for index, block in enumerate(value[:_MAX_BLOCKS]):
        if not isinstance(block, Mapping) or not isinstance(block.get("text"), str):
            raise _bad(f"{where}[{index}] must be a text block", f"{where}[{index}]")
        texts.append(block["text"])
    return "\n\n".join(texts)


def _image_part(block: Mapping[str, Any], where: str) -> JsonObject:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise _bad(f"{where}.source must be an object", f"{where}.source")
    kind = source.get("type")
    if kind == "base64":
        media, data = source.get("media_type"), source.get("data")
        if not isinstance(media, str) or not isinstance(data, str) or not data:
            raise _bad(f"{where}.source needs media_type and data", f"{where}.source")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url:
            raise _bad(f"{where}.source.url must be a string", f"{where}.source.url")
        return {"type": "image_url", "image_url": {"url": url}}
    raise _bad(f"{where}.source.type must be 'base64' or 'url'", f"{where}.source.type")


def _document_text(block: Mapping[str, Any]) -> str:
    source = block.get("source")
    title = block.get("title")
    head = f"[document: {title}]\n" if isinstance(title, str) and title else ""
    if isinstance(source, Mapping):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return head + str(source["data"])
        content = source.get("content")
        if source.get("type") == "content" and isinstance(content, list | str):
            try:
                return head + _text_of_blocks(content, "document")
            except GatewayError:
                pass
    return head + "[a document in a format this gateway cannot read was attached]"


def _parts(content: Any, where: str, translated: Translated, *,
           images: bool) -> list[JsonObject]:
    """Text, image and document blocks as OpenAI content parts (others dropped, noted)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _bad(f"{where} must be a string or a list of blocks", where)
    parts: list[JsonObject] = []
    for index, block in enumerate(content[:_MAX_BLOCKS]):
        at = f"{where}[{index}]"
        if not isinstance(block, Mapping):
            raise _bad(f"{at} must be an object", at)
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _bad(f"{at}.text must be a string", f"{at}.text")
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and images:
            parts.append(_image_part(block, at))
        elif kind == "document":
            parts.append({"type": "text", "text": _document_text(block)})
        elif kind == "tool_reference" and isinstance(block.get("tool_name"), str):
            parts.append({"type": "text", "text": f"[tool available: {block['tool_name']}]"})
        elif kind == "search_result":
            inner = block.get("content")
            text = _text_of_blocks(inner, at) if isinstance(inner, list | str) else ""
            parts.append({"type": "text", "text": text})
        else:
            translated.dropped.append(f"{at}:{str(kind)[:40]}")
    return parts


def _content_value(parts: list[JsonObject]) -> str | list[JsonObject]:
    """Parts as OpenAI content: a plain string when they are text only."""
    if all(p.get("type") == "text" for p in parts):
        return "\n\n".join(str(p["text"]) for p in parts)
    return parts


def _user(message: Mapping[str, Any], where: str, translated: Translated) -> list[JsonObject]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of blocks",
                   f"{where}.content")
    out: list[JsonObject] = []
    rest: list[Any] = []
    for index, block in enumerate(content[:_MAX_BLOCKS]):
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            at = f"{where}.content[{index}]"
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise _bad(f"{at}.tool_use_id must be a string", f"{at}.tool_use_id")
            inner = block.get("content")
            parts = _parts(inner if inner is not None else "", f"{at}.content", translated,
                           images=True)
            if block.get("is_error") is True:
                parts.insert(0, {"type": "text", "text": "[the tool reported an error]"})
            out.append({"role": "tool", "tool_call_id": call_id,
                        "content": _content_value(parts)})
        else:
            rest.append(block)
    if rest:
        parts = _parts(rest, f"{where}.content", translated, images=True)
        if parts:
            out.append({"role": "user", "content": _content_value(parts)})
    return out


def _assistant(message: Mapping[str, Any], where: str, translated: Translated,
               signer: ThinkingSigner, scope: str) -> JsonObject:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of blocks",
                   f"{where}.content")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonObject] = []
    for index, block in enumerate(content[:_MAX_BLOCKS]):
        at = f"{where}.content[{index}]"
        if not isinstance(block, Mapping):
            raise _bad(f"{at} must be an object", at)
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            if signer.verify(block["thinking"], block.get("signature"), scope=scope):
                reasoning.append(block["thinking"])
                translated.verified_thinking += 1
            else:  # restored from the store, or sent without (see the module docstring)
                translated.dropped_thinking += 1
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str) or not name:
                raise _bad(f"{at} needs an id and a name", at)
            arguments = block.get("input", {})
            calls.append({"id": call_id, "type": "function", "function": {
                "name": name,
                "arguments": json.dumps(arguments, ensure_ascii=False, separators=(",", ":")),
            }})
        elif kind == "redacted_thinking":
            translated.dropped_thinking += 1
        else:
            translated.dropped.append(f"{at}:{str(kind)[:40]}")
    out: JsonObject = {"role": "assistant", "content": "".join(texts)}
    if calls:
        out["tool_calls"] = calls
    if reasoning:
        out["reasoning_content"] = "".join(reasoning)
    return out


def _tools(tools: Any, translated: Translated) -> list[JsonObject]:
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out: list[JsonObject] = []
    for index, tool in enumerate(tools):
        at = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            raise _bad(f"{at} must be an object", at)
        if tool.get("type") not in _OFFERED_TYPES:  # hosted: web_search_*, bash_*, ...
            translated.dropped.append(f"{at}:{str(tool.get('type'))[:40]}")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"{at}.name must be a non-empty string", f"{at}.name")
        schema = tool.get("input_schema")
        function: JsonObject = {"name": name,
                                "parameters": schema if isinstance(schema, Mapping)
                                else {"type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, body: JsonObject, translated: Translated) -> None:
    if choice is None:
        return
    if not isinstance(choice, Mapping):
        raise _bad("tool_choice must be an object", "tool_choice")
    kind = choice.get("type")
    if choice.get("disable_parallel_tool_use") is True:
        body["parallel_tool_calls"] = False
    if kind == "auto":
        body["tool_choice"] = "auto"
    elif kind == "none":
        body["tool_choice"] = "none"
    elif kind == "any":
        body["tool_choice"] = "required"
        translated.forced_tool = "any"
    elif kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise _bad("tool_choice.name must be a string", "tool_choice.name")
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
        translated.forced_tool = name
    else:
        raise _bad("tool_choice.type must be auto, any, tool or none", "tool_choice.type")


def _thinking(body: Mapping[str, Any], out: JsonObject) -> None:
    """``thinking`` and ``output_config.effort`` as DeepSeek takes them."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, Mapping) else None
    if kind == "disabled":
        out["thinking"] = {"type": "disabled"}
        return  # an effort beside disabled thinking is what DeepSeek refuses: dropped
    if kind in ("enabled", "adaptive"):
        out["thinking"] = {"type": "enabled"}
    if isinstance(effort, str) and effort:
        out["reasoning_effort"] = effort


def openai_body(body: Mapping[str, Any], *, claude_models: Mapping[str, str],
                signer: ThinkingSigner, scope: str) -> Translated:
    """A Messages request as an OpenAI ``chat/completions`` body.

    Raises:
        GatewayError: ``GATEWAY_BAD_REQUEST`` with ``details['param']``.
    """
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("model must be a non-empty string", "model")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(
            max_tokens, bool) or max_tokens < 1):
        raise _bad("max_tokens must be a positive integer", "max_tokens")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("messages must be a non-empty list", "messages")
    translated = Translated({}, model)
    messages: list[JsonObject] = []
    system = body.get("system")
    if system is not None:
        text = _text_of_blocks(system, "system")
        if text:
            messages.append({"role": "system", "content": text})
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise _bad(f"{where} must be an object", where)
        role = message.get("role")
        if role == "user":
            messages.extend(_user(message, where, translated))
        elif role == "assistant":
            messages.append(_assistant(message, where, translated, signer, scope))
        elif role == "system":  # Claude Code's mid-conversation system messages, in place
            messages.append({"role": "system",
                             "content": _text_of_blocks(message.get("content"),
                                                        f"{where}.content")})
        else:
            raise _bad(f"{where}.role must be user, assistant or system", f"{where}.role")
    out: JsonObject = {"model": upstream_model(model, claude_models), "messages": messages}
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    stops = body.get("stop_sequences")
    if isinstance(stops, list) and stops and all(isinstance(s, str) for s in stops):
        out["stop"] = stops[:16]
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = value
    if body.get("stream") is True:
        out["stream"] = True
    if body.get("tools") is not None:
        tools = _tools(body["tools"], translated)
        if tools:
            out["tools"] = tools
    _tool_choice(body.get("tool_choice"), out, translated)
    if "tools" not in out:
        out.pop("tool_choice", None)
        translated.forced_tool = None
    _thinking(body, out)
    translated.body = out
    return translated


# -- answers ----------------------------------------------------------------------------


def usage_json(usage: Any) -> JsonObject:
    """OpenAI-shaped usage (``usage_json``) in Anthropic's: cache reads apart from input."""
    prompt = int(usage.get("prompt_tokens", 0)) if isinstance(usage, Mapping) else 0
    hits = int(usage.get("prompt_cache_hit_tokens", 0)) if isinstance(usage, Mapping) else 0
    output = int(usage.get("completion_tokens", 0)) if isinstance(usage, Mapping) else 0
    return {"input_tokens": max(prompt - hits, 0), "output_tokens": output,
            "cache_read_input_tokens": hits, "cache_creation_input_tokens": 0}


def _input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_arguments": arguments}
    return value if isinstance(value, dict) else {"_arguments": arguments}


def message_json(completion: Mapping[str, Any], *, model: str, signer: ThinkingSigner,
                 scope: str) -> JsonObject:
    """An OpenAI ``chat.completion`` (as the loop answers and keeps it) as a ``message``:
    thinking first, then text, then tool uses."""
    choice = completion["choices"][0]
    message = choice["message"]
    message_id = "msg_" + str(completion.get("id", "")).removeprefix("chatcmpl-")
    content: list[JsonObject] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning,
                        "signature": signer.mint(reasoning, scope=scope,
                                                 message_id=message_id)})
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        content.append({"type": "tool_use", "id": call["id"], "name": function["name"],
                        "input": _input(function.get("arguments", ""))})
    out: JsonObject = {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content,
        "stop_reason": _STOP.get(str(choice.get("finish_reason")), "end_turn"),
        "stop_sequence": None,
        "usage": usage_json(completion.get("usage")),
    }
    if isinstance(completion.get("deepseekeyes"), Mapping):
        out["deepseekeyes"] = completion["deepseekeyes"]
    return out


def check_forced(result_calls: int, forced: str | None, names: Sequence[str]) -> None:
    """Raises TurnError ``RUNTIME_TOOL_NOT_CALLED`` when a forced tool was not called."""
    if forced is None:
        return
    if result_calls and (forced == "any" or forced in names):
        return
    wanted = "a tool" if forced == "any" else f"the tool {forced[:64]!r}"
    raise TurnError(
        f"the request forced {wanted} (tool_choice), and the model answered without calling "
        "it", code="RUNTIME_TOOL_NOT_CALLED", details={"tool_choice": forced})


def answer_json(result: TurnResult, translated: Translated, *, signer: ThinkingSigner,
                scope: str) -> JsonObject:
    """A whole turn's answer as a ``message``, its forced tool checked.

    Raises:
        TurnError: ``RUNTIME_TOOL_NOT_CALLED``.
    """
    check_forced(len(result.tool_calls), translated.forced_tool,
                 [c.name for c in result.tool_calls])
    return message_json(completion_json(result), model=translated.requested_model,
                        signer=signer, scope=scope)


Event = tuple[str, JsonObject]


def message_events(message: Mapping[str, Any]) -> list[Event]:
    """A whole ``message`` as the events of a stream (a stored answer replayed to a client
    that asked for a stream)."""
    head = {**message, "content": [], "stop_reason": None}
    head.pop("deepseekeyes", None)
    out: list[Event] = [("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        empty: JsonObject = (
            {"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking"
            else {"type": "text", "text": ""} if kind == "text"
            else {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
        out.append(("content_block_start", {"type": "content_block_start", "index": index,
                                            "content_block": empty}))
        deltas: list[JsonObject] = (
            [{"type": "thinking_delta", "thinking": block["thinking"]},
             {"type": "signature_delta", "signature": block["signature"]}]
            if kind == "thinking"
            else [{"type": "text_delta", "text": block["text"]}] if kind == "text"
            else [{"type": "input_json_delta", "partial_json": json.dumps(
                block["input"], ensure_ascii=False, separators=(",", ":"))}])
        out += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": delta}) for delta in deltas]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": message["usage"]}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


class MessageStream:
    """The loop's events as Anthropic's SSE events, ``(event name, data)``, in its grammar:
    ``message_start`` first, each block opened, delta'd and stopped in turn (thinking, text,
    tool uses: a thinking block ends with its ``signature_delta``), ``message_delta`` with
    the stop reason and usage, ``message_stop``. ``result`` is set at the end."""

    def __init__(self, events: AsyncGenerator[TurnEvent, None], translated: Translated, *,
                 signer: ThinkingSigner, scope: str) -> None:
        self._events = events
        self._translated = translated
        self._signer = signer
        self._scope = scope
        self.session_id: str | None = None
        self.result: TurnResult | None = None
        self.message_id = f"msg_{uuid.uuid4().hex}"
        self._index = -1
        self._open: str | None = None  # "thinking", "text", "tool"
        self._thinking: list[str] = []
        self._tools: dict[int, int] = {}  # the OpenAI call index -> block index
        self._called: list[str] = []

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    def _start(self, kind: str, block: JsonObject) -> list[Event]:
        out = self._stop()
        self._index += 1
        self._open = kind
        out.append(("content_block_start", {"type": "content_block_start",
                                            "index": self._index, "content_block": block}))
        return out

    def _stop(self) -> list[Event]:
        if self._open is None:
            return []
        out: list[Event] = []
        if self._open == "thinking":
            signature = self._signer.mint("".join(self._thinking), scope=self._scope,
                                          message_id=self.message_id)
            out.append(self._delta({"type": "signature_delta", "signature": signature}))
            self._thinking = []
        out.append(("content_block_stop", {"type": "content_block_stop",
                                           "index": self._index}))
        self._open = None
        return out

    def _delta(self, delta: JsonObject) -> Event:
        return ("content_block_delta", {"type": "content_block_delta", "index": self._index,
                                        "delta": delta})

    def _on_delta(self, delta: Mapping[str, Any]) -> list[Event]:
        out: list[Event] = []
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            if self._open != "thinking":
                out += self._start("thinking", {"type": "thinking", "thinking": "",
                                                "signature": ""})
            self._thinking.append(reasoning)
            out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self._open != "text":
                out += self._start("text", {"type": "text", "text": ""})
            out.append(self._delta({"type": "text_delta", "text": text}))
        for call in delta.get("tool_calls") or ():
            out += self._on_call(call)
        return out

    def _on_call(self, call: Mapping[str, Any]) -> list[Event]:
        out: list[Event] = []
        position = int(call.get("index", 0))
        function = call.get("function") or {}
        if position not in self._tools:
            name = str(function.get("name") or "")
            self._called.append(name)
            out += self._start("tool", {"type": "tool_use", "id": str(call.get("id") or ""),
                                        "name": name, "input": {}})
            self._tools[position] = self._index
        elif self._tools[position] != self._index:  # deltas of an earlier call: not ours
            return out
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return out

    def _head(self, model: str) -> Event:
        return ("message_start", {"type": "message_start", "message": {
            "id": self.message_id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        }})

    async def _iterate(self) -> AsyncIterator[Event]:
        started = False
        try:
            async for event in self._events:
                if isinstance(event, Started):
                    self.session_id = event.session_id
                    started = True
                    yield self._head(self._translated.requested_model)
                elif isinstance(event, Delta):
                    for item in self._on_delta(event.delta):
                        yield item
                elif isinstance(event, Answer):
                    final = event.result
                    if not started:  # pragma: no cover - the loop starts every turn
                        yield self._head(self._translated.requested_model)
                    for i, call in enumerate(event.late):
                        for item in self._on_call({
                                "index": event.relayed + i, "id": call.id,
                                "function": {"name": call.name, "arguments": call.arguments}}):
                            yield item
                    for item in self._stop():
                        yield item
                    check_forced(len(final.tool_calls), self._translated.forced_tool,
                                 [c.name for c in final.tool_calls])
                    usage = usage_json(completion_json(final)["usage"])
                    yield ("message_delta", {
                        "type": "message_delta",
                        "delta": {"stop_reason": _STOP.get(final.finish_reason, "end_turn"),
                                  "stop_sequence": None},
                        "usage": usage,
                    })
                    yield ("message_stop", {"type": "message_stop"})
                    self.result = final
        finally:
            await self._events.aclose()


# -- token counts and errors ------------------------------------------------------------

#: What one image is counted as: DeepSeek's ceiling for an image on a seeing model.
IMAGE_TOKENS = 1024


def count_tokens(body: JsonObject) -> int:
    """Estimated input tokens of a translated (OpenAI) body, as the runtime estimates them
    (DeepSeek has no count endpoint): characters of the messages and tools, an image at
    :data:`IMAGE_TOKENS`."""
    images = 0
    chars = 0
    for message in body.get("messages", ()):
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    images += 1
                else:
                    chars += len(str(part.get("text", "")))
        elif isinstance(content, str):
            chars += len(content)
        if message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"], separators=(",", ":")))
        chars += len(str(message.get("reasoning_content") or ""))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"], separators=(",", ":")))
    return estimate_tokens(chars) + images * IMAGE_TOKENS


#: Anthropic's error type for an HTTP status.
_TYPES = {400: "invalid_request_error", 401: "authentication_error",
          403: "permission_error", 404: "not_found_error", 413: "request_too_large",
          429: "rate_limit_error", 529: "overloaded_error"}


def error_type(status: int) -> str:
    return _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_json(status: int, message: str, code: str | None) -> JsonObject:
    """Anthropic's error body, our stable code beside its type."""
    error: JsonObject = {"type": error_type(status), "message": message}
    if code is not None:
        error["code"] = code
    return {"type": "error", "error": error}
