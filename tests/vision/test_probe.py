from __future__ import annotations

import io
import json

from PIL import Image

from deepseek_eyes.vision.routing.probe import (
    PROBE_COLOURS,
    judge_probe,
    make_challenge,
    probe_prompts,
)


def test_challenge_paints_the_grid_it_claims() -> None:
    challenge = make_challenge(cell_px=16)
    image = Image.open(io.BytesIO(challenge.png)).convert("RGB")
    assert image.size == (48, 48)
    for r, row in enumerate(challenge.cells):
        for c, name in enumerate(row):
            assert image.getpixel((c * 16 + 8, r * 16 + 8)) == PROBE_COLOURS[name]
    assert len({name for row in challenge.cells for name in row}) >= 4


def test_challenges_are_random() -> None:
    grids = {make_challenge().cells for _ in range(20)}
    assert len(grids) > 15


def test_judge_counts_cells() -> None:
    challenge = make_challenge()
    right = json.dumps({"cells": [list(row) for row in challenge.cells]})
    assert judge_probe(right, challenge) == 9
    assert judge_probe(f"<think>red red</think>```json\n{right}\n```", challenge) == 9
    wrong = [list(row) for row in challenge.cells]
    wrong[1][1] = "white" if wrong[1][1] != "white" else "black"
    assert judge_probe(json.dumps({"cells": wrong}), challenge) == 8
    words = " ".join(name for row in challenge.cells for name in row)
    assert judge_probe(f"The cells are: {words}", challenge) == 9
    assert judge_probe("I cannot see images.", challenge) == 0


def test_prompt_names_every_colour() -> None:
    system, user = probe_prompts()
    assert "PROBE" in user
    assert all(name in user for name in PROBE_COLOURS)
    assert "JSON" in system
