"""A hand-written incremental ``text/event-stream`` decoder for streamed chat completions.

:class:`~deepseek_eyes.llm.stream.ChatStream` feeds it decoded text as bytes arrive and
gets back the ``data`` of each completed event; deciding what an event means (a chunk,
``[DONE]``, an error) and whether the stream ended complete stays with the stream.

Decisions a newcomer would otherwise undo:

* Written by hand rather than taken from the ``openai`` SDK or an SSE library, because the
  client must tell a complete stream from a cut one (see :mod:`deepseek_eyes.llm.stream`);
  this decoder therefore never guesses: an event left without its blank line at the end
  of the stream is dropped, not dispatched.
* It works on text, not bytes: the client decodes UTF-8 incrementally, so a multi-byte
  character split across network reads never reaches this parser half-formed. A CR ends
  its line at once; an LF right after it (even in the next piece) completes the CRLF.
"""

from __future__ import annotations

import re

__all__ = ["SSEDecoder"]

_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder that yields each event's ``data`` field.

    Follows the WHATWG rules that matter for chat streams: lines end with CRLF, LF or CR;
    lines starting with ``:`` are comments (keep-alives); several ``data:`` lines in one event
    are joined with ``\\n``; a blank line dispatches the event; ``event``/``id``/``retry``
    fields are ignored; an event left without its blank line at end of stream is dropped.
    """

    def __init__(self) -> None:
        self._partial: list[str] = []  # pieces of a line whose end has not arrived yet
        self._skip_lf = False  # the last text ended in CR: a leading LF completes a CRLF
        self._data: list[str] | None = None
        self._started = False

    def feed(self, text: str) -> list[str]:
        """Add decoded text; return the data of every event it completed.

        Linear in the text fed, however the stream is split: each character is scanned
        once, and a long line arriving in pieces is joined once, when its end arrives.
        """
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")  # a leading byte-order mark is ignored
        events: list[str] = []
        start = 1 if self._skip_lf and text.startswith("\n") else 0
        if text:
            self._skip_lf = False
        for match in _LINE_END.finditer(text, start):
            piece = text[start : match.start()]
            if self._partial:
                self._partial.append(piece)
                piece = "".join(self._partial)
                self._partial = []
            self._line(piece, events)
            start = match.end()
            if match.group() == "\r" and start == len(text):
                self._skip_lf = True
        if start < len(text):
            self._partial.append(text[start:])
        return events

    def close(self) -> list[str]:
        """End of stream: an unfinished line and an undispatched event are dropped."""
        self._partial = []
        self._skip_lf = False
        self._data = None
        return []

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data is not None:
                events.append("\n".join(self._data))
            self._data = None
            return
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            if self._data is None:
                self._data = []
            self._data.append(value)
