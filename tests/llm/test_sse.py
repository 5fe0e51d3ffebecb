"""SSEDecoder: line endings split across feeds, comments, multi-line data, end of stream."""

from __future__ import annotations

from deepseek_eyes.llm import SSEDecoder


def test_sse_decoder_handles_split_lines_comments_and_multiline_data() -> None:
    decoder = SSEDecoder()
    events: list[str] = []
    for piece in [": ping\r", "\n\r\ndata: {\"a\":", "\r", "\ndata:  1}\r\n", "event: x\n", "\n"]:
        events += decoder.feed(piece)
    events += decoder.feed("data: first\rdata: second\r\r")
    events += decoder.feed("data: unterminated")
    events += decoder.close()

    assert events == ['{"a":\n 1}', "first\nsecond"]


def test_line_ends_of_every_kind_and_split_points() -> None:
    stream = "data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\ndata: e\n\n"
    expected = ["a", "b", "c", "d\ne"]
    assert SSEDecoder().feed(stream) == expected
    for size in (1, 2, 3, 5):
        decoder = SSEDecoder()
        got: list[str] = []
        for i in range(0, len(stream), size):
            got += decoder.feed(stream[i : i + size])
        assert got == expected, size


def test_leading_byte_order_mark_is_ignored() -> None:
    assert SSEDecoder().feed("\ufeffdata: x\n\n") == ["x"]


def test_many_line_ends_stay_linear() -> None:
    decoder = SSEDecoder()
    # A quadratic scan would take minutes here; a linear one is instant.
    assert decoder.feed("\n" * 2_000_000) == []
    assert decoder.feed(": keep-alive\r" * 200_000 + "\n") == []
    long_line = SSEDecoder()
    for _ in range(20_000):
        long_line.feed("x" * 50)
    assert long_line.feed("\n\n") == []
