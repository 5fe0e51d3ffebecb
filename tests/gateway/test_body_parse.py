"""The body parser's fast path (ASCII strings are not searched for surrogates)
refuses exactly what the full check refuses, for generated bodies in every encoding JSON
allows and with surrogates written every way they can be."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eyes.errors import GatewayError
from deepseek_eyes.gateway.body import BodyLimits, parse_body, read_request

_SURROGATE = re.compile("[\ud800-\udfff]")
texts = st.text(alphabet=st.characters(codec=None), max_size=20)  # surrogates included
values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8)


def _holds_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, list):
        return any(_holds_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_surrogate(k) or _holds_surrogate(v) for k, v in value.items())
    return False


@settings(max_examples=400, deadline=None)
@given(document=st.dictionaries(texts, values, max_size=4),
       ascii_only=st.booleans(),
       encoding=st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32-be"]))
def test_a_body_is_refused_exactly_when_it_holds_a_lone_surrogate(
        document: dict[str, Any], ascii_only: bool, encoding: str) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only)
    try:
        raw = text.encode(encoding, "surrogatepass")
    except UnicodeEncodeError:
        return
    if _holds_surrogate(document):
        with pytest.raises(GatewayError) as refused:
            parse_body(raw)
        assert refused.value.code == "GATEWAY_BAD_REQUEST"
    else:
        assert parse_body(raw) == document


@pytest.mark.parametrize("raw", [
    b'{"a": "\\ud800"}', b'{"\\udc00": 1}', b'{"a": ["x", {"b": "\\uDBFF"}]}',
    b'{"a": "\xed\xa0\x80"}', b'{"a": "ok \xed\xbf\xbf"}',
])
def test_every_spelling_of_a_lone_surrogate_is_refused(raw: bytes) -> None:
    with pytest.raises(GatewayError):
        parse_body(raw)


def test_an_integer_too_long_to_convert_is_named_not_called_not_json() -> None:
    raw = b'{"max_tokens": ' + b"7" * 5000 + b"}"
    for parse in (parse_body, lambda body: read_request(body, BodyLimits()).fields):
        with pytest.raises(GatewayError) as refused:
            parse(raw)
        assert refused.value.code == "GATEWAY_BAD_REQUEST"
        assert refused.value.details["reason"] == "integer_too_long"
        assert "5000 digits" in refused.value.message
    assert parse_body(b'{"n": ' + b"7" * 4000 + b"}")["n"] == int("7" * 4000)
