from __future__ import annotations

import re
from pathlib import Path

import pytest

import deepseek_eyes.errors as errors_module
from deepseek_eyes.errors import (
    ERROR_CODES,
    CliError,
    DeepSeekEyesError,
    ImageError,
    RouteTimeoutError,
)

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


def test_docs_rows_say_what_the_table_says() -> None:
    """Each code's row in docs/errors.md carries the table's sentence (the docs may add a
    parenthesis, such as an HTTP status), and the docs list no code the table lacks."""
    rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| (.*) \|$", DOCS.read_text("utf-8"), re.M))
    assert sorted(rows) == sorted(ERROR_CODES)
    for code, meaning in ERROR_CODES.items():
        assert rows[code].rstrip(".").startswith(meaning.rstrip(".")), code


def test_command_line_codes_are_registered() -> None:
    for code in ("CLI_USAGE", "CLI_OUTPUT_DIR_MISSING", "CLI_OUTPUT_FORMAT_UNKNOWN",
                 "CLI_ADDRESS_IN_USE", "EVIDENCE_FILE_INVALID"):
        assert code in ERROR_CODES
    assert CliError("bad").code == "CLI_USAGE"


def test_every_token_missing_says_which_command_makes_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ``*_TOKEN_MISSING``, in the table and as raised, names ``deepseek-eyes token``."""
    from deepseek_eyes.browser.http import resolve_browser_token
    from deepseek_eyes.desktop.http import resolve_desktop_token
    from deepseek_eyes.settings import Settings
    from deepseek_eyes.terminal.config import resolve_token
    from deepseek_eyes.vision_server.http import resolve_vision_token

    missing = sorted(code for code in ERROR_CODES if code.endswith("_TOKEN_MISSING"))
    assert missing == ["BROWSER_TOKEN_MISSING", "DESKTOP_TOKEN_MISSING",
                       "TERMINAL_TOKEN_MISSING", "VISION_TOKEN_MISSING"]
    for code in missing:
        assert "`deepseek-eyes token`" in ERROR_CODES[code], code
    for prefix in ("BROWSER", "DESKTOP", "TERMINAL", "VISION"):
        monkeypatch.delenv(f"DEEPSEEK_EYES_{prefix}_TOKEN", raising=False)
    settings = Settings()
    resolvers = {
        "BROWSER_TOKEN_MISSING": lambda: resolve_browser_token(settings.browser),
        "DESKTOP_TOKEN_MISSING": lambda: resolve_desktop_token(settings.desktop),
        "TERMINAL_TOKEN_MISSING": lambda: resolve_token(settings),
        "VISION_TOKEN_MISSING": lambda: resolve_vision_token(settings.vision.serve),
    }
    for code, resolve in resolvers.items():
        with pytest.raises(DeepSeekEyesError) as caught:
            resolve()
        assert caught.value.code == code
        assert "`deepseek-eyes token` makes one" in caught.value.message, code
