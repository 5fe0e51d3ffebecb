"""The gateway's ``Server-Timing``: one clock per request, from its first ASGI layer.

With ``gateway.server_timing`` on, :class:`ServerTiming` wraps the whole gateway app (the
security layer, the drain, every route and front): it opens a
:class:`~deepseek_eyes.stages.StageClock` as the request enters and writes the clock's
stages into the response's start. The clock stops there, so a stream reports its stages up
to its first event (what time-to-first-token is), and a whole answer everything but the
sending of its body.

Decision a newcomer would otherwise undo: the clock is opened here, not by each handler,
so the security checks and the body's receipt (the ``http`` stage) and whatever no stage
claims (the loop's bookkeeping, code between stages) are inside the total the stages are
compared with; a clock opened by the handler hid them and made the stages look complete.
The outer ASGI layers up to the security checks, and the framework's routing from them to
the handler's first stage, are handed to ``http`` (:func:`~deepseek_eyes.stages.hand_to`):
measured, not left to nobody.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes.stages import StageClock

__all__ = ["ServerTiming"]


class ServerTiming:
    """Time each HTTP request by stage and answer it as a ``Server-Timing`` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with StageClock() as clock:
            clock.hand("http")  # the gateway's outer ASGI layers, up to the security checks

            async def timed(message: Message) -> None:
                if message["type"] == "http.response.start":
                    clock.stop()
                    headers = [h for h in message.get("headers", [])
                               if h[0].lower() != b"server-timing"]
                    headers.append((b"server-timing", clock.server_timing().encode()))
                    message = {**message, "headers": headers}
                await send(message)

            await self.app(scope, receive, timed)
