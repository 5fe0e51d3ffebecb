from __future__ import annotations

import re
from pathlib import Path

import pytest

import deepseek_eyes.errors as errors_module
from deepseek_eyes.errors import ERROR_CODES, DeepSeekEyesError, ImageError, RouteTimeoutError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def test_codes_are_upper_snake() -> None:
    for code in ERROR_CODES:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]+", code), code


def test_every_code_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [code for code in ERROR_CODES if f"`{code}`" not in text]
    assert missing == []


def test_every_default_code_is_registered() -> None:
    for name in errors_module.__all__:
        obj = getattr(errors_module, name)
        is_error = isinstance(obj, type) and issubclass(obj, DeepSeekEyesError)
        if is_error and obj is not DeepSeekEyesError:
            assert obj.default_code in ERROR_CODES, name


def test_unregistered_code_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unregistered"):
        ImageError("x", code="IMAGE_NOPE")


def test_families_subclass_builtins() -> None:
    assert issubclass(ImageError, ValueError)
    assert issubclass(RouteTimeoutError, TimeoutError)
    err = ImageError("empty", code="IMAGE_EMPTY", details={"size": 0})
    assert err.to_dict() == {"code": "IMAGE_EMPTY", "message": "empty", "details": {"size": 0}}
    assert str(err) == "IMAGE_EMPTY: empty"
