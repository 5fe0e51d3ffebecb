"""Which final models exist and which of them take images: settings first, then ``/models``.

The gateway asks this on every turn (``image_input`` decides whether pixels may reach the
model or must become evidence text first), so answers come from a cache and the upstream
listing is fetched at most once per ``llm.models_ttl``.

Decisions a newcomer would otherwise undo:

* No model name is hard-coded anywhere. A model takes images when the settings say so
  (``input = ["text", "image"]`` set explicitly), else when its ``/models`` entry says so in
  one of the shapes providers use, else not. A default ``input`` is not an explicit one:
  pydantic's ``model_fields_set`` tells them apart, so ``{ id = "x" }`` in the settings does
  not hide what the upstream reports about ``x``.
* A failed listing never empties the catalog: the last good listing (or the settings alone)
  keeps serving, the failure's *code* is kept in :attr:`ModelCatalog.last_error`, and the
  next attempt waits :data:`FAILURE_RETRY_S` (or the TTL, if shorter) so that a down upstream
  does not add its timeout to every turn. While one refresh runs, callers that already have
  a listing use it instead of queueing behind the refresh.
* An empty catalog after a failed listing is the upstream's failure, not an unknown model:
  :meth:`ModelCatalog.default_model` raises the listing's own error (``LLM_UNAVAILABLE``,
  ``LLM_TIMEOUT``, ...), so a user with the upstream down is told that, not
  ``LLM_MODEL_UNKNOWN``. :attr:`ModelCatalog.last_failure` lets the gateway say the same.
* Taking images is not the same as declaring text *and* image input. The gateway's native
  path needs only the first (:func:`declares_image_input`, flags such as ``vision: true``
  included); vision auto-detection needs the second (the seed: "models that explicitly
  declare both text and image input"), which only a list of input modalities can say
  (:func:`declares_text_and_image_input`, :meth:`ModelCatalog.text_and_image_models`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.settings import LLMSettings

__all__ = [
    "FAILURE_RETRY_S",
    "MAX_LISTED_MODELS",
    "ModelCatalog",
    "ModelInfo",
    "declares_image_input",
    "declares_text_and_image_input",
    "listing_image",
]

#: At most this many entries of an upstream listing are read.
MAX_LISTED_MODELS = 1000
#: After a failed listing, the next attempt waits this long (or ``models_ttl`` if shorter).
FAILURE_RETRY_S = 30.0

_MAX_ID_CHARS = 200
_MAX_OWNER_CHARS = 200
_MAX_MODALITIES = 32  # items of one metadata list looked at


@dataclass(frozen=True)
class ModelInfo:
    """One final model. ``source`` is ``"settings"``, ``"upstream"`` or
    ``"settings+upstream"``. ``listing_image``: what its ``/models`` entry says about image
    input (True, False when it lists input modalities without images, None when it says
    nothing, as DeepSeek's ids-only listing does)."""

    id: str
    image_input: bool
    source: str
    owned_by: str | None = None
    listing_image: bool | None = None


def _names(value: Any) -> Iterable[str]:
    """Lower-cased strings of a metadata list, boundedly."""
    if isinstance(value, list | tuple):
        for item in value[:_MAX_MODALITIES]:
            if isinstance(item, str):
                yield item.strip().lower()


_IMAGE_NAMES = ("image", "images", "vision")


def _has_image(value: Any) -> bool:
    return any(name in _IMAGE_NAMES for name in _names(value))


def declares_image_input(entry: Mapping[str, Any]) -> bool:
    """Whether a ``/models`` entry says the model takes images, in any shape we know.

    ``input_modalities: [..., "image"]``; ``modalities: {"input": [...]}`` or
    ``modalities: [...]``; OpenRouter's ``architecture: {"input_modalities": [...]}`` or
    ``architecture.modality: "text+image->text"``; ``capabilities: {"vision": true}`` or
    ``capabilities: [..., "vision"]``; ``supports_vision: true`` or ``vision: true``.
    """
    if _has_image(entry.get("input_modalities")):
        return True
    modalities = entry.get("modalities")
    if isinstance(modalities, dict):
        if _has_image(modalities.get("input")):
            return True
    elif _has_image(modalities):
        return True
    architecture = entry.get("architecture")
    if isinstance(architecture, dict):
        if _has_image(architecture.get("input_modalities")):
            return True
        modality = architecture.get("modality")
        if isinstance(modality, str) and "image" in modality[:200].partition("->")[0].lower():
            return True
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, dict):
        if capabilities.get("vision") is True:
            return True
    elif _has_image(capabilities):
        return True
    return entry.get("supports_vision") is True or entry.get("vision") is True


def _declared_inputs(entry: Mapping[str, Any]) -> set[str]:
    """The input modalities a ``/models`` entry lists, in the list shapes
    :func:`declares_image_input` reads (``image``, ``images`` and ``vision`` read as
    ``image``); flags (``vision: true``, capabilities) list none."""
    lists: list[Any] = [entry.get("input_modalities")]
    modalities = entry.get("modalities")
    lists.append(modalities.get("input") if isinstance(modalities, dict) else modalities)
    architecture = entry.get("architecture")
    if isinstance(architecture, dict):
        lists.append(architecture.get("input_modalities"))
        modality = architecture.get("modality")
        if isinstance(modality, str):
            lists.append(modality[:200].partition("->")[0].split("+"))
    names = {name for value in lists for name in _names(value)}
    return {"image" if name in _IMAGE_NAMES else name for name in names}


def declares_text_and_image_input(entry: Mapping[str, Any]) -> bool:
    """Whether a ``/models`` entry explicitly lists both text and image input:
    ``input_modalities: ["text", "image"]``, ``modalities.input``, a ``modalities`` list,
    ``architecture.input_modalities`` or ``architecture.modality: "text+image->text"``.

    A vision flag (``supports_vision``, ``capabilities.vision``) says the model takes images
    but declares no input list, so it is not enough here.
    """
    return {"text", "image"} <= _declared_inputs(entry)


def listing_image(entry: Mapping[str, Any] | None) -> bool | None:
    """What a ``/models`` entry says about image input: True when it declares it in any
    shape :func:`declares_image_input` reads, False when it lists input modalities without
    images, None when it says nothing."""
    if entry is None:
        return None
    if declares_image_input(entry):
        return True
    return False if _declared_inputs(entry) else None


def _owner(entry: Mapping[str, Any]) -> str | None:
    owner = entry.get("owned_by")
    return owner[:_MAX_OWNER_CHARS] if isinstance(owner, str) and owner else None


class ModelCatalog:
    """The final models of ``[llm]``: the settings' models in order, then the upstream's.

    ``clock`` is injectable so tests can age the cached listing without sleeping.
    """

    def __init__(
        self,
        settings: LLMSettings,
        client: ChatClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock
        self._lock = anyio.Lock()
        self._listing: list[JsonObject] | None = None  # the last good upstream listing
        self._next_refresh: float | None = None
        self._merged: list[ModelInfo] = []
        self._by_id: dict[str, ModelInfo] = {}
        self._text_and_image: frozenset[str] = frozenset()
        #: The ``LLM_*`` code of the last failed listing; None once one succeeds.
        self.last_error: str | None = None
        #: The last failed listing's error itself; None once one succeeds.
        self.last_failure: LLMError | None = None
        self._merge()

    async def models(self) -> list[ModelInfo]:
        """Every known model: settings first (in order), then upstream ids not listed yet."""
        await self._refresh()
        return list(self._merged)

    async def get(self, model_id: str) -> ModelInfo | None:
        await self._refresh()
        return self._by_id.get(model_id)

    async def text_and_image_models(self) -> list[str]:
        """Ids of the models that explicitly declare both text and image input, in
        :meth:`models` order: the settings' ``input`` when set explicitly (it wins), else
        the ``/models`` entry (:func:`declares_text_and_image_input`)."""
        await self._refresh()
        return [info.id for info in self._merged if info.id in self._text_and_image]

    async def image_input(self, model_id: str) -> bool:
        """Settings ``input`` (when set explicitly) wins; else upstream metadata; else False."""
        info = await self.get(model_id)
        return info.image_input if info is not None else False

    async def default_model(self) -> str:
        """``llm.model``, else the first of ``llm.models``, else the first upstream id.

        Raises:
            LLMError: the failed listing's own error (``LLM_UNAVAILABLE``, ``LLM_TIMEOUT``,
                ``LLM_HTTP_ERROR``, ...) when none is configured and the listing failed;
                ``LLM_MODEL_UNKNOWN`` when the upstream answered and lists none.
        """
        if self._settings.model is not None:
            return self._settings.model
        if self._settings.models:
            return self._settings.models[0].id
        await self._refresh()
        if self._merged:
            return self._merged[0].id
        failure = self.last_failure
        if failure is not None:
            raise LLMError(
                f"no final model is configured and listing the endpoint's models failed: "
                f"{failure.message}",
                code=failure.code,
                details={**failure.details, "stage": "list_models"},
            )
        raise LLMError(
            "no final model is configured (llm.model, llm.models) and the endpoint lists none",
            code="LLM_MODEL_UNKNOWN",
            details={"last_error": self.last_error},
        )

    # -- the cache -----------------------------------------------------------------------

    def _fresh(self) -> bool:
        return self._next_refresh is not None and self._clock() < self._next_refresh

    async def _refresh(self) -> None:
        if self._fresh():
            return
        if self._lock.locked() and self._next_refresh is not None:
            return  # a refresh is under way; serve what we have rather than queue behind it
        async with self._lock:
            if self._fresh():
                return
            ttl = self._settings.models_ttl
            try:
                entries = await self._client.list_models()
            except LLMError as exc:
                self.last_error = exc.code
                self.last_failure = exc
                self._next_refresh = self._clock() + min(ttl, FAILURE_RETRY_S)
                return
            self._listing = entries[:MAX_LISTED_MODELS]
            self.last_error = None
            self.last_failure = None
            self._next_refresh = self._clock() + ttl
            self._merge()

    def _merge(self) -> None:
        upstream: dict[str, JsonObject] = {}
        for entry in self._listing or ():
            model_id = entry.get("id")
            if isinstance(model_id, str) and 0 < len(model_id) <= _MAX_ID_CHARS:
                upstream.setdefault(model_id, entry)
        merged: list[ModelInfo] = []
        seen: set[str] = set()
        both: set[str] = set()

        def add(model_id: str, explicit_input: tuple[str, ...] | None) -> None:
            """``explicit_input``: the settings' ``input`` when set explicitly (it wins)."""
            if model_id in seen:
                return
            seen.add(model_id)
            entry = upstream.get(model_id)
            if explicit_input is None:
                image = entry is not None and declares_image_input(entry)
                text_and_image = entry is not None and declares_text_and_image_input(entry)
            else:
                image = "image" in explicit_input
                text_and_image = {"text", "image"} <= set(explicit_input)
            if text_and_image:
                both.add(model_id)
            merged.append(
                ModelInfo(
                    id=model_id,
                    image_input=image,
                    source="settings+upstream" if entry is not None else "settings",
                    owned_by=_owner(entry) if entry is not None else None,
                    listing_image=listing_image(entry),
                )
            )

        for configured in self._settings.models:
            explicit = "input" in configured.model_fields_set
            add(configured.id, configured.input if explicit else None)
        if self._settings.model is not None:
            add(self._settings.model, None)
        for model_id, entry in upstream.items():
            if model_id not in seen:
                seen.add(model_id)
                merged.append(
                    ModelInfo(
                        id=model_id,
                        image_input=declares_image_input(entry),
                        source="upstream",
                        owned_by=_owner(entry),
                        listing_image=listing_image(entry),
                    )
                )
                if declares_text_and_image_input(entry):
                    both.add(model_id)
        self._merged = merged
        self._text_and_image = frozenset(both)
        self._by_id = {info.id: info for info in merged}
