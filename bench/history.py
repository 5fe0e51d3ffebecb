"""The gateway's own cost of a continued turn against the length of its history.

    .venv/bin/python bench/history.py [--turns 5] [--sizes 10,100,1000,10000] [--before REV]

A stock client (the official ``openai`` client, no session header) resends its whole
history every turn, and the gateway finds the session it continues by the chained hash of
that history (``session_prefixes``). For each size ``n``: one request of ``n - 1`` short
messages (alternating user and assistant, not measured) starts the conversation and its
answer makes it ``n``; then ``--turns`` continuations each add a question, and the gateway's
own time from its ``Server-Timing`` header is taken per turn: its ``total`` less its
``upstream`` stage (the loopback model's time, which grows with the history too).
``--before REV`` runs the same conversations against ``REV``'s sources
(exported with ``git archive``) in a second ``serve``, one size after the other on each,
and prints both side by side: ``ours`` is this tree, ``before`` is ``REV``. A size a
revision refuses prints its error code instead of a time.

What "flat" means here: the body must still be read and parsed (a client sends it all), so
a continuation cannot be free of ``n``; what must not grow with ``n`` is the rest (the
matching, the log, the view). ``per-msg`` is the slope between the two largest sizes, in
microseconds per message of history.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import start_gateway
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


def measure(client: openai.OpenAI, n: int, turns: int) -> list[float] | str:
    """Gateway ms of each of ``turns`` continuations of an ``n``-message history (or the
    error code that refused the conversation)."""
    messages = history(n - 1 if n % 2 == 0 else n - 2)
    out: list[float] = []
    try:
        answer = client.chat.completions.create(model="deepseek-v4-pro", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        if n % 2:  # an odd size: one more user message, answered, before the measured turns
            messages.append({"role": "user", "content": "One more?"})
            answer = client.chat.completions.create(model="deepseek-v4-pro", messages=messages)
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        for turn in range(turns):
            messages.append({"role": "user", "content": f"And turn {turn}?"})
            raw = client.chat.completions.with_raw_response.create(
                model="deepseek-v4-pro", messages=messages)
            reply = raw.parse()
            if _session(reply) != _session(answer):  # not found by its history: a bug
                return "UNMATCHED"
            answer = reply
            timing = stages_of(raw.headers.get("server-timing"))
            out.append(timing.get("total", float("nan")) - timing.get("upstream", 0.0))
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    except openai.APIStatusError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        return str(body.get("code") or body.get("error", {}).get("code") or exc.status_code)
    return out


def _session(answer: Any) -> str | None:
    extra = getattr(answer, "deepseekeyes", None)
    return extra.get("session_id") if isinstance(extra, dict) else None


def export(rev: str, into: Path) -> Path:
    """``rev``'s ``src`` tree under ``into``, for a ``serve`` of that revision."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run(src: Path | None, upstream: str, sizes: list[int], turns: int,
        tmp: Path) -> dict[int, list[float] | str]:
    home = Path(tempfile.mkdtemp(dir=tmp))
    process, gateway = start_gateway(SETTINGS.format(upstream=upstream), home,
                                     gateway="server_timing = true", src=src)
    try:
        client = openai.OpenAI(base_url=gateway, api_key="bench", max_retries=0,
                               timeout=600)
        measure(client, 10, 1)  # warm-up
        return {n: measure(client, n, turns) for n in sizes}
    finally:
        process.terminate()
        process.wait(timeout=30)


def cell(value: list[float] | str) -> str:
    return f"{statistics.median(value):9.2f}" if isinstance(value, list) else f"{value:>9}"


def main(sizes: list[int], turns: int, before: str | None) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        ours = run(None, upstream.base_url, sizes, turns, tmp)
        old = run(export(before, tmp / "before"), upstream.base_url, sizes, turns, tmp) \
            if before else None
    print(f"history: gateway ms per continued turn (median of {turns}), by messages of history")
    print(f"{'messages':>8} {'ours':>9}" + (f" {'before':>9} {'ratio':>7}" if old else ""))
    for n in sizes:
        line = f"{n:>8} {cell(ours[n])}"
        if old is not None:
            line += f" {cell(old[n])}"
            a, b = ours[n], old[n]
            line += (f" {statistics.median(a) / statistics.median(b):7.2f}"
                     if isinstance(a, list) and isinstance(b, list) else f" {'':>7}")
        print(line)
    for label, result in (("ours", ours), ("before", old)):
        if result is None:
            continue
        done = [n for n in sizes if isinstance(result[n], list)]
        if len(done) >= 2:
            lo, hi = done[-2], done[-1]
            slope = (statistics.median(result[hi]) - statistics.median(result[lo])) / (hi - lo)
            print(f"per-msg {label}: {slope * 1000:.2f} us per message of history "
                  f"({lo} -> {hi})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--before", help="a git revision to measure side by side")
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.turns, args.before)
