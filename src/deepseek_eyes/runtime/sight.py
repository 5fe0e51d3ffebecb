"""Which final model sees: learned per upstream and model, never inferred from a name.

A turn with an image asks :meth:`Sight.verdict` once. The answer comes from, in order:

1. **the settings**, when they say (``[[llm.models]] input`` set explicitly): never probed;
2. **what was learned** and has not expired (``llm.sight_ttl``, a day by default): a pixel
   probe's verdict, or an upstream's 400 refusing image parts (:meth:`Sight.refused`);
3. **a pixel probe of the model itself** (``llm.sight_probe``): the seed's randomized 3x3
   grid sent to the final model through the final-answer client; naming all nine colours
   means it sees, a refusal of the image part or a wrong answer means it does not. The
   verdict is kept in SQLite (``model_sight``) per upstream and model until it expires,
   then the model is asked again, so a model that gains sight is noticed;
4. **the priors**, until a probe has answered or when none can be made (no key, the
   upstream down): the upstream's ``/models`` entry when it declares input modalities,
   then the shipped table of DeepSeek's documented models (:mod:`deepseek_eyes.llm.known`).

Decisions a newcomer would otherwise undo:

* **The probe blocks the first image turn of the day** rather than running in the
  background: a background probe would make which path a turn takes depend on timing.
  It costs one small call (a 192-px PNG, thinking off where the model thinks) per upstream
  and model per TTL; concurrent turns share one probe.
* **A probe that gets no answer decides nothing.** A timeout or a 5xx leaves the priors in
  charge and is tried again after :data:`RETRY_AFTER_FAILURE_S`, not at every turn.
* **A refusal is learned where it happens.** The turn loop reports an upstream 400 that
  refuses image parts (:func:`refuses_images`); the model is marked text-only for the TTL
  and the same turn goes on with evidence.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, LLMError
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.llm.known import known_model
from deepseek_eyes.llm.thinking import thinking_mode
from deepseek_eyes.settings import LLMSettings
from deepseek_eyes.store.db import Database
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.routing.probe import judge_probe, make_challenge, probe_prompts

__all__ = [
    "RETRY_AFTER_FAILURE_S",
    "Sight",
    "SightHow",
    "SightStore",
    "SightVerdict",
    "refuses_images",
]

#: After a probe that got no answer, the next one waits this long (the priors decide).
RETRY_AFTER_FAILURE_S = 60.0
#: Models whose probe state (lock, retry time) a process keeps before it forgets the idle.
MAX_TRACKED_MODELS = 1024
#: Completion tokens a probe answer may take (nine colour names in JSON).
PROBE_MAX_TOKENS = 200

SightHow = Literal["settings", "probe", "refusal", "listing", "table", "unknown"]

_IMAGE_WORDS = ("image", "vision", "multimodal", "multi-modal", "picture")
_NOT_SUPPORTED = ("not support", "unsupported", "does not accept", "not accept",
                  "not allowed", "cannot accept")


@dataclass(frozen=True)
class SightVerdict:
    """Whether ``model`` takes images, and how that is known. ``code`` says why a learned
    verdict is negative (``LLM_PROBE_MISMATCH``, ``LLM_IMAGE_REFUSED``)."""

    model: str
    sees: bool
    how: SightHow
    code: str | None = None
    checked_at: float | None = None
    expires_at: float | None = None

    def json(self) -> JsonObject:
        out: JsonObject = {"model": self.model, "sees": self.sees, "how": self.how}
        if self.code is not None:
            out["code"] = self.code
        if self.checked_at is not None:
            out["checked_at"] = self.checked_at
            out["expires_at"] = self.expires_at
        return out


def refuses_images(exc: DeepSeekEyesError) -> bool:
    """Whether an upstream error is a 400 that refuses image parts as such: DeepSeek's
    "unknown variant `image_url`, expected `text`", or a message that says images (or
    vision) are not supported. A 400 about one image (too large, undecodable) is not a
    refusal of sight and teaches nothing."""
    if not isinstance(exc, LLMError) or exc.code != "LLM_HTTP_ERROR":
        return False
    if exc.details.get("status") != 400:
        return False
    message = str(exc.details.get("provider_message") or "").lower()
    if "image_url" in message and ("unknown variant" in message or "expected `text`" in message):
        return True
    negative = any(words in message for words in _NOT_SUPPORTED)
    return negative and any(word in message for word in _IMAGE_WORDS)


def _upstream(base_url: str) -> str:
    return base_url.rstrip("/")


class SightStore:
    """The learned verdicts, one row per upstream and model (``model_sight``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, upstream: str, model: str) -> SightVerdict | None:
        row = self._db.query_one(
            "SELECT * FROM model_sight WHERE upstream = ? AND model = ?", (upstream, model))
        if row is None:
            return None
        return SightVerdict(model, bool(row["sees"]), row["how"], row["code"],
                            row["checked_at"], row["expires_at"])

    def put(self, upstream: str, verdict: SightVerdict) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO model_sight (upstream, model, sees, how, code, checked_at,"
            " expires_at) VALUES (?,?,?,?,?,?,?)",
            (upstream, verdict.model, int(verdict.sees), verdict.how, verdict.code,
             verdict.checked_at, verdict.expires_at))


class Sight:
    """Which final model sees (the module docstring gives the order)."""

    def __init__(
        self,
        llm: LLMSettings,
        *,
        catalog: ModelCatalog,
        client: ChatClient,
        db: Database,
        usage: UsageTracker,
        audit: AuditLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._llm = llm
        self._catalog = catalog
        self._client = client
        self._store = SightStore(db)
        self._usage = usage
        self._audit = audit
        self._clock = clock
        self._upstream = _upstream(llm.base_url)
        self._locks: dict[str, anyio.Lock] = {}
        self._retry_at: dict[str, float] = {}

    @property
    def upstream(self) -> str:
        return self._upstream

    def configured(self, model: str) -> SightVerdict | None:
        """The settings' word on ``model`` (an explicit ``[[llm.models]] input``), or None."""
        entry = self._llm.model_settings(model)
        if entry is None or "input" not in entry.model_fields_set:
            return None
        return SightVerdict(model, "image" in entry.input, "settings")

    def learned(self, model: str) -> SightVerdict | None:
        """A learned verdict that has not expired, or None."""
        found = self._store.get(self._upstream, model)
        if found is None or (found.expires_at or 0) <= self._clock():
            return None
        return found

    async def priors(self, model: str) -> SightVerdict:
        """The ``/models`` entry when it declares input modalities, else the known-models
        table, else "does not see" (``unknown``)."""
        info = await self._catalog.get(model)
        if info is not None and info.listing_image is not None:
            return SightVerdict(model, info.listing_image, "listing")
        known = known_model(model)
        if known is not None:
            return SightVerdict(model, known.sees, "table")
        return SightVerdict(model, False, "unknown")

    async def verdict(self, model: str) -> SightVerdict:
        """Whether ``model`` sees; may make one probe call (shared by concurrent turns)."""
        said = self.configured(model)
        if said is not None:
            return said
        found = self.learned(model)
        if found is not None:
            return found
        if not self._llm.sight_probe or self._clock() < self._retry_at.get(model, 0.0):
            return await self.priors(model)
        if len(self._locks) >= MAX_TRACKED_MODELS:  # model names come from clients: bounded
            self._locks = {m: k for m, k in self._locks.items() if k.locked()}
            self._retry_at.clear()
        lock = self._locks.setdefault(model, anyio.Lock())
        async with lock:
            found = self.learned(model)  # another turn probed while this one waited
            if found is not None:
                return found
            if self._clock() < self._retry_at.get(model, 0.0):
                return await self.priors(model)
            probed = await self.probe(model)
        return probed if probed is not None else await self.priors(model)

    async def probe(self, model: str) -> SightVerdict | None:
        """Ask ``model`` the pixel probe now and keep its verdict; None when no verdict
        came (the failure is audited, and the next probe waits)."""
        challenge = make_challenge()
        system, user = probe_prompts()
        payload: JsonObject = {
            "model": model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": [
                    {"type": "text", "text": user},
                    {"type": "image_url", "image_url": {
                        "url": "data:image/png;base64,"
                        + base64.b64encode(challenge.png).decode("ascii")}},
                ]},
            ],
            "max_tokens": PROBE_MAX_TOKENS,
            "temperature": 0,
        }
        if thinking_mode(model, {}, self._llm) == "enabled":
            payload["thinking"] = {"type": "disabled"}  # nine colours need no reasoning
        started = self._clock()
        try:
            result = await self._client.complete(payload)
        except LLMError as exc:
            if refuses_images(exc):
                return self._keep(model, False, "probe", "LLM_IMAGE_REFUSED")
            self._retry_at[model] = self._clock() + RETRY_AFTER_FAILURE_S
            self._audit.append("llm.sight", model, outcome="failed", code=exc.code,
                               upstream=self._upstream)
            return None
        self._usage.record_exact(UsageCategory.PROBE, result.usage, source=f"sight:{model}",
                                 model=model)
        correct = judge_probe(result.content, challenge)
        sees = correct == 9
        return self._keep(model, sees, "probe", None if sees else "LLM_PROBE_MISMATCH",
                             extra={"correct": correct,
                                    "ms": round((self._clock() - started) * 1000)})

    def refused(self, model: str) -> SightVerdict:
        """The upstream refused image parts for ``model`` in a turn: it is text-only until
        the verdict expires."""
        return self._keep(model, False, "refusal", "LLM_IMAGE_REFUSED")

    def _keep(self, model: str, sees: bool, how: SightHow, code: str | None, *,
              extra: dict[str, Any] | None = None) -> SightVerdict:
        now = self._clock()
        verdict = SightVerdict(model, sees, how, code, now, now + self._llm.sight_ttl)
        self._store.put(self._upstream, verdict)
        self._retry_at.pop(model, None)
        self._audit.append("llm.sight", model, outcome="ok", sees=sees, how=how, code=code,
                           upstream=self._upstream, **(extra or {}))
        return verdict

