"""A vision route that is any OpenAI-compatible multimodal chat endpoint.

The route is a thin adapter: it builds one chat request (system prompt, then a user turn
with the text and the image as a ``data:`` URL) and turns the client's ``LLM_*`` failures
into ``VISION_ROUTE_*`` codes the router understands.

Decisions a newcomer would otherwise undo:

* Secrets are resolved when the client is first needed, not when the route is built: a
  route whose key is unset can still be listed, configured and reported on, and it fails
  with ``VISION_ROUTE_CREDENTIAL_MISSING`` (``operational=False``) only when used. That
  failure is the operator's to fix, so it must not open the route's circuit as if the
  endpoint were down. Every transport, status and format failure is ``operational=True``.
* The fingerprint hashes kind, base URL and model only, never the key: rotating a key
  keeps a passed probe, while pointing the route at another endpoint or model drops it.
  The answer fingerprint, which keys cached evidence, adds what changes an answer but not
  whether the route reads pixels: ``max_tokens``, ``temperature``, ``json_mode``, the box
  convention and the names (never the values) of extra headers.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import ConfigError, LLMError, RouteError, RouteTimeoutError
from deepseek_eyes.llm import ChatClient, ChatResult
from deepseek_eyes.settings import RouteSettings, SecretRef
from deepseek_eyes.vision.types import RouteAnswer, VisionRequest

__all__ = ["ROUTE_CODES", "OpenAIRoute"]

#: How each client failure reads at the route level.
ROUTE_CODES: Mapping[str, str] = {
    "LLM_TIMEOUT": "VISION_ROUTE_TIMEOUT",
    "LLM_UNAVAILABLE": "VISION_ROUTE_UNAVAILABLE",
    "LLM_HTTP_ERROR": "VISION_ROUTE_HTTP_ERROR",
    "LLM_BAD_RESPONSE": "VISION_ROUTE_BAD_RESPONSE",
    "LLM_STREAM_INCOMPLETE": "VISION_ROUTE_STREAM_INCOMPLETE",
}


class OpenAIRoute:
    """One ``kind = "openai"`` entry of ``vision.routes``; implements ``VisionRoute``."""

    def __init__(
        self, settings: RouteSettings, *, environ: Mapping[str, str] | None = None
    ) -> None:
        if settings.kind != "openai" or settings.base_url is None or settings.model is None:
            raise ValueError("OpenAIRoute needs an openai route with base_url and model")
        self._settings = settings
        self._base_url: str = settings.base_url
        self._model: str = settings.model
        self._environ = environ
        self._client: ChatClient | None = None
        self._fingerprint = hashlib.sha256(
            f"openai\n{self._base_url}\n{self._model}".encode()
        ).hexdigest()
        answer = {
            "fingerprint": self._fingerprint,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "json_mode": settings.json_mode,
            "box_convention": settings.box_convention,
            "header_names": sorted(name.lower() for name in settings.headers),
        }
        if settings.thinking is not None:  # absent when unset: older routes keep their cache
            answer["thinking"] = settings.thinking
        self._answer_fingerprint = canonical_json.SORTED_DEFAULT.sha256_hex(answer)

    # -- identity ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def kind(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def probe_exempt(self) -> bool:
        return False

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def answer_fingerprint(self) -> str:
        return self._answer_fingerprint

    @property
    def box_convention(self) -> str:
        return self._settings.box_convention

    @property
    def settings(self) -> RouteSettings:
        return self._settings

    # -- operations ----------------------------------------------------------------------

    async def check_health(self) -> None:
        """List the endpoint's models and require ours among them (``health_check="models"``).

        Raises:
            RouteError: ``VISION_ROUTE_UNHEALTHY`` when the model is not listed, the mapped
                transport/status code when the list cannot be fetched, or
                ``VISION_ROUTE_CREDENTIAL_MISSING``.
        """
        if self._settings.health_check == "none":
            return
        client = self._ensure_client()
        try:
            models = await client.list_models()
        except LLMError as exc:
            raise self._route_error(exc, "health check") from exc
        ids = {str(entry.get("id")) for entry in models}
        if not any(_same_model(self._model, listed) for listed in ids):
            raise RouteError(
                f"route {self.name}: model {self._model!r} is not listed by the endpoint",
                code="VISION_ROUTE_UNHEALTHY",
                details={"route": self.name, "model": self._model, "listed": len(ids)},
            )

    async def call(self, request: VisionRequest) -> RouteAnswer:
        """Send the image and prompts as one chat completion; return the model's text.

        Raises:
            RouteError: a ``VISION_ROUTE_*`` code for every failure; an empty answer is
                ``VISION_ROUTE_BAD_RESPONSE``. Timeouts are :class:`RouteTimeoutError`.
        """
        client = self._ensure_client()
        try:
            result = await client.complete(
                self._payload(request), stream=self._settings.stream
            )
        except LLMError as exc:
            raise self._route_error(exc, "call") from exc
        return self._answer(result)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- helpers -------------------------------------------------------------------------

    def _payload(self, request: VisionRequest) -> JsonObject:
        encoded = base64.b64encode(request.image_bytes).decode("ascii")
        payload: JsonObject = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": request.system_prompt},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": request.user_prompt},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:{request.media_type};base64,{encoded}"},
                        },
                    ],
                },
            ],
            "max_tokens": self._settings.max_tokens,
            "temperature": self._settings.temperature,
        }
        if self._settings.json_mode:
            payload["response_format"] = {"type": "json_object"}
        if self._settings.thinking is not None:
            payload["thinking"] = {"type": self._settings.thinking}
        return payload

    def _answer(self, result: ChatResult) -> RouteAnswer:
        if not result.content.strip():
            raise RouteError(
                f"route {self.name}: the model returned an empty answer",
                code="VISION_ROUTE_BAD_RESPONSE",
                details={
                    "route": self.name,
                    "finish_reason": result.finish_reason,
                    "reasoning_chars": len(result.reasoning),
                },
            )
        return RouteAnswer(
            text=result.content,
            usage=result.usage,
            model=result.model or self._model,
            streamed=result.streamed,
        )

    def _ensure_client(self) -> ChatClient:
        if self._client is None:
            settings = self._settings
            api_key = self._secret(settings.api_key, "api_key")
            headers = {
                name: self._secret(ref, f"headers.{name}") for name, ref in settings.headers.items()
            }
            try:
                self._client = ChatClient(
                    self._base_url,
                    api_key=api_key,
                    headers={k: v for k, v in headers.items() if v is not None},
                    timeout=settings.timeout,
                    connect_timeout=settings.connect_timeout,
                    base_url_source=f"vision route {self.name!r}",
                )
            except ValueError as exc:
                # The value cannot travel in a header (a stray newline in the variable).
                raise RouteError(
                    f"route {self.name}: a credential cannot be sent as an HTTP header",
                    code="VISION_ROUTE_CREDENTIAL_MISSING",
                    details={"route": self.name, "reason": "invalid_header_value"},
                    operational=False,
                ) from exc
        return self._client

    def _secret(self, ref: SecretRef | None, field: str) -> str | None:
        if ref is None:
            return None
        try:
            return ref.resolve(None if self._environ is None else dict(self._environ))
        except ConfigError:
            raise RouteError(
                f"route {self.name}: environment variable {ref.env} ({field}) is not set",
                code="VISION_ROUTE_CREDENTIAL_MISSING",
                details={"route": self.name, "env": ref.env, "field": field},
                operational=False,
            ) from None

    def _route_error(self, exc: LLMError, operation: str) -> RouteError:
        code = ROUTE_CODES.get(exc.code, "VISION_ROUTE_BAD_RESPONSE")
        details = {"route": self.name, "operation": operation, "llm_code": exc.code, **exc.details}
        message = f"route {self.name}: {exc.message}"
        if code == "VISION_ROUTE_TIMEOUT":
            return RouteTimeoutError(message, code=code, details=details)
        return RouteError(message, code=code, details=details)


def _same_model(configured: str, listed: str) -> bool:
    """Whether a listed id names the configured model. Some endpoints list ids with a
    namespace the chat API does not need (Gemini's ``models/gemini-2.5-flash``)."""
    return listed == configured or listed.rsplit("/", 1)[-1] == configured.rsplit("/", 1)[-1]
