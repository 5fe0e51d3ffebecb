"""The Responses wire's reasoning sealer: each ring key's cipher is derived once and kept,
and what it seals opens only under the same scope and a ring that still holds the key."""

from __future__ import annotations

import os

from deepseek_eyes.runtime.turn.wire.anthropic_messages import ThinkingKeyring
from deepseek_eyes.runtime.turn.wire.openai_responses import ReasoningSealer


def test_the_sealer_keeps_each_keys_cipher_and_opens_across_a_rotation() -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = ReasoningSealer(ThinkingKeyring([old]))
    blobs = [before.seal(f"thought {i}", scope="gateway:a") for i in range(3)]
    assert len({b.split(".")[2] for b in blobs}) == 3  # a fresh nonce each time
    assert [before.open(b, scope="gateway:a") for b in blobs] == [
        "thought 0", "thought 1", "thought 2"]
    assert before.open(blobs[0], scope="gateway:b") is None  # another key's client
    # The rotated ring seals with the new key and still opens what the old one sealed.
    after = ReasoningSealer(ThinkingKeyring([new, old]))
    fresh = after.seal("later", scope="gateway:a")
    assert fresh.split(".")[1] != blobs[0].split(".")[1]
    assert after.open(blobs[1], scope="gateway:a") == "thought 1"
    assert after.open(fresh, scope="gateway:a") == "later"
    assert before.open(fresh, scope="gateway:a") is None  # a key it never had
    assert ReasoningSealer(ThinkingKeyring([new])).open(blobs[2], scope="gateway:a") is None
