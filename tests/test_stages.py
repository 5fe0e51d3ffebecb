"""Stage timing: exclusive time per stage, a no-op without a clock, blind to other threads,
and the gateway's Server-Timing header built from it."""

from __future__ import annotations

import threading
import time

from deepseek_eyes.stages import STAGES, StageClock, hand_to, stage
from inprocess_gateway import serve_in_process
from runtime.upstream import LoopbackUpstream


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_nested_stage_pauses_the_outer_one() -> None:
    with StageClock() as clock, stage("store"):
        _spin(0.02)
        with stage("seal"):
            _spin(0.03)
        _spin(0.01)
    assert 0.028 <= clock.totals["store"] < 0.045
    assert 0.028 <= clock.totals["seal"] < 0.045
    assert sum(clock.totals.values()) <= clock.total


def test_without_a_clock_a_stage_counts_nothing_and_costs_little() -> None:
    started = time.perf_counter()
    for _ in range(10_000):
        with stage("store"):
            pass
    assert time.perf_counter() - started < 0.5  # a context lookup each, no clock to feed
    with StageClock() as clock:
        pass
    assert set(clock.totals) == set(STAGES)
    assert not any(clock.totals.values())


def test_marks_from_another_thread_are_not_counted() -> None:
    with StageClock() as clock:
        import contextvars

        context = contextvars.copy_context()  # as anyio.to_thread hands it over
        worker = threading.Thread(target=context.run, args=(lambda: _in_stage(0.02),))
        worker.start()
        worker.join()
    assert clock.totals["upstream"] == 0.0


def _in_stage(seconds: float) -> None:
    with stage("upstream"):
        _spin(seconds)


def test_a_stopped_clock_counts_no_more() -> None:
    with StageClock() as clock:
        clock.stop()
        with stage("vision"):
            _spin(0.01)
    assert clock.totals["vision"] == 0.0
    # A stage running at the stop (a stream's response started inside it) gets its time up
    # to the stop, and nothing after it.
    with StageClock() as clock, stage("http"):
        _spin(0.02)
        clock.stop()
        header = clock.server_timing()
        _spin(0.02)
    assert 0.018 <= clock.totals["http"] < 0.035
    assert "http;dur=" in header
    assert sum(clock.totals.values()) <= clock.total


def test_time_handed_to_a_stage_counts_until_the_next_stage_starts() -> None:
    with StageClock() as clock:
        hand_to("http")  # a framework's routing, say
        _spin(0.02)
        with stage("parse"):  # our handler's first stage ends the handoff
            _spin(0.01)
        _spin(0.02)  # between stages and not handed: nobody's
        with stage("store"):
            hand_to("http")  # inside a stage: refused, the stage keeps its time
            _spin(0.01)
        hand_to("http")
        _spin(0.01)
    # the clock stopped with a handoff open: counted up to the stop
    assert 0.028 <= clock.totals["http"] < 0.045
    assert 0.008 <= clock.totals["parse"] < 0.02
    assert 0.008 <= clock.totals["store"] < 0.02
    assert clock.total - sum(clock.totals.values()) >= 0.018  # the unhanded gap
    without = StageClock()
    hand_to("http")  # no clock open: nothing happens
    assert not any(without.totals.values())


def test_the_gateway_reports_stages_as_server_timing_when_asked() -> None:
    with LoopbackUpstream() as upstream:
        llm = {"base_url": upstream.base_url, "model": "deepseek-v4-pro"}
        body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}
        with serve_in_process(llm) as door:
            plain = door.http.post("/v1/chat/completions", json=body)
        assert plain.status_code == 200
        assert "server-timing" not in plain.headers
        with serve_in_process(llm, gateway={"server_timing": True}) as door:
            timed = door.http.post("/v1/chat/completions", json=body)
            streamed = door.http.post("/v1/chat/completions", json={**body, "stream": True})
            fronts = [
                door.http.post("/v1/messages", json={
                    "model": "claude-opus-4-8", "max_tokens": 64,
                    "messages": [{"role": "user", "content": "hi"}]},
                    headers={"anthropic-version": "2023-06-01"}),
                door.http.post("/v1/responses", json={
                    "model": "deepseek-v4-pro", "store": False, "input": "hi"}),
            ]
            refused = door.http.post("/v1/chat/completions", content=b"{",
                                     headers={"content-type": "application/json"})
    assert timed.status_code == 200
    names = [part.split(";")[0].strip() for part in timed.headers["server-timing"].split(",")]
    # A text turn passes the HTTP layer, parses, stores, prepares its view, calls the
    # model, answers and seals; no image, so no admission or vision; the total last.
    assert {"http", "parse", "store", "prepare", "upstream", "answer", "seal"} <= set(names)
    assert "admission" not in names
    assert "vision" not in names
    assert names[-1] == "total"
    durations = {part.split(";")[0].strip(): float(part.split("dur=")[1])
                 for part in timed.headers["server-timing"].split(",")}
    assert sum(v for k, v in durations.items() if k != "total") <= durations["total"] + 0.01
    assert "upstream" in streamed.headers["server-timing"]  # up to the first chunk
    # The Anthropic and Responses fronts are timed by the same clock, stage by stage, and
    # so is a refusal (its parse, no model call).
    for answer in fronts:
        assert answer.status_code == 200, answer.text
        timing = answer.headers["server-timing"]
        assert all(f"{name};" in timing for name in ("parse", "prepare", "upstream", "answer"))
    assert refused.status_code == 400
    assert "parse;" in refused.headers["server-timing"]
    assert "upstream" not in refused.headers["server-timing"]
