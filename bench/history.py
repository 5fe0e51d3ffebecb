"""The gateway's own cost of a continued turn against the length of its history.

    .venv/bin/python bench/history.py [--turns 5] [--sizes 10,100,1000,10000] [--before REV]

A stock client (the official ``openai`` client, no session header) resends its whole
history every turn, and the gateway finds the session it continues by the chained hash of
that history (``session_prefixes``). For each size ``n``: one request of ``n - 1`` short
messages (alternating user and assistant, not measured) starts the conversation and its
answer makes it ``n``; then ``--turns`` continuations each add a question, and the gateway's
own time from its ``Server-Timing`` header is taken per turn: its ``total`` less its
``upstream`` stage (the loopback model's time, which grows with the history too), and
"the rest": that less the ``http`` and ``parse`` stages (the body received and parsed,
which a client that resends everything makes O(n) whatever we do); and the CPU time the
gateway process spent on the turn (all threads, from ``/proc``: what a loaded machine
distorts least; it includes sending the fitted history upstream).
``--before REV`` runs the same conversations against ``REV``'s sources
(exported with ``git archive``) in a second ``serve``, both running, each continuation on
one and then the other (the same load for both), and prints both side by side: ``ours``
is this tree, ``before`` is ``REV``. A size a revision refuses prints its error code
instead of a time.

What "flat" means here: the body must still be read and parsed (a client sends it all), so
a continuation cannot be free of ``n``; what must not grow with ``n`` is the rest (the
matching, the log, the view). ``per-msg`` is the slope between the two largest sizes, in
microseconds per message of history.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import export, start_gateway
from conversation import stages_of
from runtime.upstream import LoopbackUpstream

SETTINGS = ('[llm]\nbase_url = "{upstream}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
            '[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n'
            '[vision]\nprobe = false\n')


def history(n: int) -> list[dict[str, Any]]:
    """``n`` short messages, user first, ending with a user message when ``n`` is odd."""
    return [{"role": "user", "content": f"Question {i}: what comes after {i}?"} if i % 2 == 0
            else {"role": "assistant", "content": f"{i + 1} comes after {i}."}
            for i in range(n)]


Sample = tuple[float, float, float]  # (total less upstream, that less http and parse,
#                                    the gateway process's CPU time), ms


def cpu_ms(pid: int) -> float:
    """CPU time the process's threads have run so far, in ms (the scheduler's nanosecond
    count: a turn is far shorter than a clock tick)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e6


def continuations(client: openai.OpenAI, pid: int, n: int,
                  turns: int) -> Iterator[Sample | str]:
    """Gateway ms of each of ``turns`` continuations of an ``n``-message history, one per
    ``next`` (the untimed start of the conversation runs with the first); an error code
    instead, once, when the conversation was refused."""
    messages = history(n - 1 if n % 2 == 0 else n - 2)
    try:
        answer = client.chat.completions.create(model="deepseek-v4-pro", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        if n % 2:  # an odd size: one more user message, answered, before the measured turns
            messages.append({"role": "user", "content": "One more?"})
            answer = client.chat.completions.create(model="deepseek-v4-pro", messages=messages)
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        for turn in range(turns):
            messages.append({"role": "user", "content": f"And turn {turn}?"})
            cpu = cpu_ms(pid)
            raw = client.chat.completions.with_raw_response.create(
                model="deepseek-v4-pro", messages=messages)
            cpu = cpu_ms(pid) - cpu
            reply = raw.parse()
            if _session(reply) != _session(answer):  # not found by its history: a bug
                yield "UNMATCHED"
                return
            answer = reply
            timing = stages_of(raw.headers.get("server-timing"))
            own = timing.get("total", float("nan")) - timing.get("upstream", 0.0)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            yield own, own - timing.get("parse", 0.0) - timing.get("http", 0.0), cpu
    except openai.APIStatusError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        yield str(body.get("code") or body.get("error", {}).get("code") or exc.status_code)


def measure(clients: list[tuple[openai.OpenAI, int]], n: int,
            turns: int) -> list[list[Sample] | str]:
    """:func:`continuations` of each client (and its server's pid), turn by turn in turn
    (one revision's turn, then the other's: a change of load falls on both alike)."""
    runs = [continuations(client, pid, n, turns) for client, pid in clients]
    out: list[list[Sample] | str] = [[] for _ in clients]
    for _ in range(turns):
        for index, run in enumerate(runs):
            done = out[index]
            got = next(run, None) if isinstance(done, list) else None
            if isinstance(got, str):
                out[index] = got
            elif got is not None and isinstance(done, list):
                done.append(got)
    return out


def _session(answer: Any) -> str | None:
    extra = getattr(answer, "deepseekeyes", None)
    return extra.get("session_id") if isinstance(extra, dict) else None


Result = dict[int, list[Sample] | str]


def main(sizes: list[int], turns: int, before: str | None) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        servers = [start_gateway(SETTINGS.format(upstream=upstream.base_url),
                                 Path(tempfile.mkdtemp(dir=tmp)),
                                 gateway="server_timing = true", src=src)
                   for src in ([None, export(before, tmp / "before")] if before else [None])]
        try:
            clients = [(openai.OpenAI(base_url=url, api_key="bench", max_retries=0,
                                      timeout=600), process.pid)
                       for process, url in servers]
            measure(clients, 10, 1)  # warm-up
            # Size by size, turn by turn, each revision in turn: both see the same load.
            results: list[Result] = [{} for _ in clients]
            for n in sizes:
                for result, samples in zip(results, measure(clients, n, turns), strict=True):
                    result[n] = samples
        finally:
            for process, _ in servers:
                process.terminate()
                process.wait(timeout=30)
    ours, old = results[0], (results[1] if before else None)
    for column, title in ((0, "gateway ms (total less upstream)"),
                          (1, "the rest (less http and parse: what must not grow)"),
                          (2, "the gateway process's CPU ms (all its threads)")):
        print(f"history: {title} per continued turn (median of {turns}), by messages")
        print(f"{'messages':>8} {'ours':>9}" + (f" {'before':>9} {'ratio':>7}" if old else ""))
        for n in sizes:
            line = f"{n:>8} {cell(ours[n], column)}"
            if old is not None:
                line += f" {cell(old[n], column)}"
                a, b = median(ours[n], column), median(old[n], column)
                line += f" {a / b:7.2f}" if a is not None and b is not None else f" {'':>7}"
            print(line)
        for label, result in (("ours", ours), ("before", old)):
            if result is None:
                continue
            done = [n for n in sizes if isinstance(result[n], list)]
            if len(done) >= 2:
                lo, hi = done[-2], done[-1]
                slope = ((median(result[hi], column) or 0.0)
                         - (median(result[lo], column) or 0.0)) / (hi - lo)
                print(f"per-msg {label}: {slope * 1000:.2f} us per message of history "
                      f"({lo} -> {hi})")


def median(value: list[Sample] | str, column: int) -> float | None:
    return statistics.median(s[column] for s in value) if isinstance(value, list) else None


def cell(value: list[Sample] | str, column: int) -> str:
    found = median(value, column)
    return f"{found:9.2f}" if found is not None else f"{value!s:>9}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--before", help="a git revision to measure side by side")
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.turns, args.before)
