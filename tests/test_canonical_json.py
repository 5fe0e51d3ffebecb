"""The canonical JSON formats' bytes are pinned: stored hashes depend on every one of them.

If a test here fails, a format changed and hashes already in users' databases, audit
chains and receipt logs no longer verify. Add a new format instead of editing one.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import (
    ASCII,
    ASCII_LENIENT,
    CANONICAL,
    LENIENT,
    SORTED_DEFAULT,
    CanonicalFormat,
)

OBJECTS: dict[str, Any] = {
    "non_ascii": {"ключ": "café ☕ 日本", "a": "\u2028\x00"},
    "floats": {"x": 0.1, "y": 1e-7, "z": 1e22, "n": -0.0, "i": 3, "b": True, "none": None},
    "nested": {"b": [1, {"d": [], "c": {}}], "a": {"z": "é", "y": [2.5, "x"]}},
}

_UTF8 = {
    "non_ascii": '{"a":"\u2028\\u0000","ключ":"café ☕ 日本"}'.encode(),
    "floats": b'{"b":true,"i":3,"n":-0.0,"none":null,"x":0.1,"y":1e-07,"z":1e+22}',
    "nested": '{"a":{"y":[2.5,"x"],"z":"é"},"b":[1,{"c":{},"d":[]}]}'.encode(),
}
_ASCII = {
    "non_ascii": b'{"a":"\\u2028\\u0000","\\u043a\\u043b\\u044e\\u0447":'
                 b'"caf\\u00e9 \\u2615 \\u65e5\\u672c"}',
    "floats": _UTF8["floats"],
    "nested": b'{"a":{"y":[2.5,"x"],"z":"\\u00e9"},"b":[1,{"c":{},"d":[]}]}',
}
PINNED: dict[str, dict[str, bytes]] = {
    "canonical": _UTF8,
    "lenient": _UTF8,
    "ascii": _ASCII,
    "ascii-lenient": _ASCII,
    "sorted-default": {
        "non_ascii": b'{"a": "\\u2028\\u0000", "\\u043a\\u043b\\u044e\\u0447": '
                     b'"caf\\u00e9 \\u2615 \\u65e5\\u672c"}',
        "floats": b'{"b": true, "i": 3, "n": -0.0, "none": null, "x": 0.1, "y": 1e-07,'
                  b' "z": 1e+22}',
        "nested": b'{"a": {"y": [2.5, "x"], "z": "\\u00e9"}, "b": [1, {"c": {}, "d": []}]}',
    },
}
# The digest of one pinned object per format, so a change in hashing shows up by itself.
PINNED_SHA256 = {
    "canonical": "33a3eb5febfdd372",
    "ascii": "e2af1c885d6bbd95",
    "sorted-default": "ddd6c544a11ce6c5",
}

FORMATS = [CANONICAL, LENIENT, ASCII, ASCII_LENIENT, SORTED_DEFAULT]

# The json.dumps spelling each format replaced, as the call sites wrote it before.
LEGACY: dict[str, dict[str, Any]] = {
    "canonical": {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False,
                  "allow_nan": False},
    "lenient": {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
    "ascii": {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True,
              "allow_nan": False},
    "ascii-lenient": {"sort_keys": True, "separators": (",", ":")},
    "sorted-default": {"sort_keys": True},
}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_bytes_are_pinned(fmt: CanonicalFormat, name: str) -> None:
    assert fmt.dumps_bytes(OBJECTS[name]) == PINNED[fmt.name][name]
    assert fmt.dumps(OBJECTS[name]) == PINNED[fmt.name][name].decode("utf-8")
    assert fmt.sha256_hex(OBJECTS[name]) == hashlib.sha256(PINNED[fmt.name][name]).hexdigest()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_digest_is_pinned(fmt: CanonicalFormat) -> None:
    if fmt.name in PINNED_SHA256:
        assert fmt.sha256_hex(OBJECTS["non_ascii"])[:16] == PINNED_SHA256[fmt.name]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_format_matches_the_spelling_it_replaced(fmt: CanonicalFormat, name: str) -> None:
    assert fmt.dumps(OBJECTS[name]) == json.dumps(OBJECTS[name], **LEGACY[fmt.name])


def test_module_functions_are_the_canonical_format() -> None:
    value = OBJECTS["nested"]
    assert canonical_json.dumps(value) == CANONICAL.dumps(value)
    assert canonical_json.dumps_bytes(value) == CANONICAL.dumps_bytes(value)
    assert canonical_json.sha256_hex(value) == CANONICAL.sha256_hex(value)


@pytest.mark.parametrize("fmt", [CANONICAL, ASCII], ids=lambda f: f.name)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_strict_formats_refuse_nan(fmt: CanonicalFormat, bad: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        fmt.dumps({"x": [bad]})


@pytest.mark.parametrize("fmt", [LENIENT, ASCII_LENIENT, SORTED_DEFAULT],
                         ids=lambda f: f.name)
def test_lenient_formats_write_nan_as_python_does(fmt: CanonicalFormat) -> None:
    value = {"x": [math.nan, math.inf, -math.inf]}
    expected = '{"x":[NaN,Infinity,-Infinity]}' if fmt.compact \
        else '{"x": [NaN, Infinity, -Infinity]}'
    assert fmt.dumps(value) == expected


def test_unencodable_and_circular_values_raise() -> None:
    with pytest.raises(TypeError):
        canonical_json.dumps({"x": object()})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json.dumps(loop)


def test_normalized_text_gives_one_spelling_of_one_json_value() -> None:
    from deepseek_eyes.canonical_json import normalized_text

    spellings = ['{"b": 1, "a": "\\u00e9"}', '{"a":"é","b":1}', ' {\n "a": "é",\n "b": 1\n}']
    assert {normalized_text(s) for s in spellings} == {'{"a":"é","b":1}'}
    assert normalized_text("[1, 2]") == "[1,2]"
    # Values that differ stay different, and text that is not an object or array stays.
    assert normalized_text('{"a": 1}') != normalized_text('{"a": 1.0}')
    for text in ("sunny", "1", '"x"', "{not json", "", "[1, 2"):
        assert normalized_text(text) == text
    deep = "[" * 100_000 + "]" * 100_000
    assert normalized_text(deep) == deep  # too deep to hash as a value: left as sent
