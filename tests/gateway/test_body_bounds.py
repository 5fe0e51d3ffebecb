"""The gateway's door (``read_request``): a body is bounded in text bytes and JSON values
before anything is built, and the top-level fields the gateway does not read are skipped by
a validating scanner that must agree with the JSON grammar exactly: generated documents,
and the same documents with one character broken, are accepted or refused as ``json``
accepts or refuses them."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eyes.errors import GatewayError
from deepseek_eyes.gateway.body import (
    KNOWN_FIELDS,
    MAX_IGNORED_LISTED,
    MAX_JSON_DEPTH,
    MAX_JSON_ITEMS,
    BodyLimits,
    _check_tree,
    read_request,
)

LIMITS = BodyLimits()
_SURROGATE = re.compile("[\ud800-\udfff]")

texts = st.text(alphabet=st.characters(codec=None), max_size=12)  # surrogates included
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | texts | st.floats(
    allow_nan=False, allow_infinity=False)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10)
top_keys = st.sampled_from(sorted(KNOWN_FIELDS)) | texts


def _refused(raw: bytes, limits: BodyLimits = LIMITS) -> GatewayError:
    with pytest.raises(GatewayError) as refused:
        read_request(raw, limits)
    return refused.value


def _keys_hold_surrogate(value: Any) -> bool:
    if isinstance(value, list):
        return any(_keys_hold_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(bool(_SURROGATE.search(k)) or _keys_hold_surrogate(v)
                   for k, v in value.items())
    return False


def _holds_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, list):
        return any(_holds_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_surrogate(k) or _holds_surrogate(v) for k, v in value.items())
    return False


@settings(max_examples=400, deadline=None)
@given(document=st.dictionaries(top_keys, values, max_size=5), ascii_only=st.booleans())
def test_known_fields_are_kept_and_the_others_named(
        document: dict[str, Any], ascii_only: bool) -> None:
    raw = json.dumps(document, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    kept = {k: v for k, v in document.items() if k in KNOWN_FIELDS}
    skipped = [k for k in document if k not in KNOWN_FIELDS]
    # A lone surrogate anywhere in what is kept, or in any key, is refused; a skipped
    # field's string values are never built, so they cannot reach the store or upstream.
    if (_holds_surrogate(kept) or any(_SURROGATE.search(k) for k in document)
            or _keys_hold_surrogate([document[k] for k in skipped])):
        assert _refused(raw).code == "GATEWAY_BAD_REQUEST"
        return
    body = read_request(raw, LIMITS)
    assert body.fields == kept
    assert list(body.ignored) == [k[:64] for k in skipped][:MAX_IGNORED_LISTED]


_BREAKERS = st.sampled_from(list('{}[],:" 0-.e\\atn'))


@settings(max_examples=600, deadline=None)
@given(document=st.dictionaries(st.text(alphabet="abcmx", max_size=4), st.recursive(
           st.none() | st.booleans() | st.integers(-99, 99) | st.text(alphabet="ab ,{", max_size=4),
           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
               st.text(alphabet="ab", max_size=2), inner, max_size=3),
           max_leaves=8), max_size=4),
       where=st.floats(0, 1), breaker=_BREAKERS, delete=st.booleans())
def test_the_scanner_agrees_with_the_json_grammar(
        document: dict[str, Any], where: float, breaker: str, delete: bool) -> None:
    text = json.dumps(document)
    at = int(where * len(text))
    broken = text[:at] + text[at + 1:] if delete else text[:at] + breaker + text[at:]
    try:
        expected = json.loads(broken)
    except ValueError:
        expected = ValueError
    if not isinstance(expected, dict):
        assert _refused(broken.encode()).code == "GATEWAY_BAD_REQUEST"
        return
    body = read_request(broken.encode(), LIMITS)
    assert body.fields == {k: v for k, v in expected.items() if k in KNOWN_FIELDS}
    assert set(body.ignored) == {k for k in expected if k not in KNOWN_FIELDS}


def test_image_data_counts_toward_the_body_limit_not_the_text_allowance() -> None:
    small = BodyLimits(max_text_bytes=4096)
    data = base64.b64encode(bytes(range(256)) * 400).decode()  # ~136 KB of base64
    for url in (f"data:image/png;base64,{data}",
                f"data:image/png;base64,{data}".replace("/", "\\/")):  # PHP escapes slashes
        part = {"type": "image_url", "image_url": {"url": url}}
        raw = json.dumps({"messages": [{"role": "user", "content": [part]}]}).encode()
        raw = raw.replace(b"\\\\/", b"\\/")  # json.dumps escaped the backslash; undo it
        assert read_request(raw, small).fields["messages"][0]["content"][0] == json.loads(
            raw)["messages"][0]["content"][0]
    prose = json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}).encode()
    refused = _refused(prose, small)
    assert refused.code == "GATEWAY_BODY_TEXT_TOO_LARGE"
    assert refused.details["limit"] == 4096
    # Text dressed as image data is still text: only a data URL's payload is exempt.
    fake = json.dumps({"messages": [{"role": "user", "content": "data:image " * 600}]})
    assert _refused(fake.encode(), small).code == "GATEWAY_BODY_TEXT_TOO_LARGE"


def test_values_are_counted_before_anything_is_built() -> None:
    limits = BodyLimits(max_nodes=1000)
    many = json.dumps({"model": "m", "extra": [{}] * 1000}).encode()
    refused = _refused(many, limits)
    assert refused.code == "GATEWAY_JSON_TOO_MANY_NODES"
    assert refused.details["limit"] == 1000
    nested = json.dumps({"messages": [[1, 2]] * 600}).encode()
    assert _refused(nested, limits).code == "GATEWAY_JSON_TOO_MANY_NODES"
    # Commas, brackets and braces inside strings are prose, not values.
    prose = json.dumps({"messages": [{"role": "user", "content": "a, [b], {c}, " * 2000}]})
    assert read_request(prose.encode(), limits).fields["messages"][0]["role"] == "user"


def test_no_container_holds_more_than_its_members() -> None:
    wide = json.dumps({"messages": [0] * (MAX_JSON_ITEMS + 1)}).encode()
    refused = _refused(wide, BodyLimits(max_nodes=10 * MAX_JSON_ITEMS))
    assert refused.code == "GATEWAY_JSON_TOO_MANY_NODES"
    assert refused.details["items_limit"] == MAX_JSON_ITEMS


def _outcome(document: Any, *, strings: bool = True) -> str:
    try:
        _check_tree(document, strings=strings)
    except GatewayError as exc:
        return exc.code
    return "ok"


@given(values, st.integers(0, MAX_JSON_DEPTH + 2))
@settings(max_examples=150, deadline=None)
def test_the_walk_without_strings_bounds_depth_and_size_as_the_full_one(
        document: Any, nesting: int) -> None:
    # A text with no surrogate escape and none decoded as is: only containers are walked,
    # and they are judged exactly as by the full walk.
    if _holds_surrogate(document) or any(_SURROGATE.search(k) for k in _keys(document)):
        return
    for _ in range(nesting):
        document = [document] if nesting % 2 else {"k": document}
    assert _outcome(document, strings=False) == _outcome(document)


def _keys(value: Any) -> list[str]:
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _keys(v))]
    return []


def test_a_long_flat_history_is_walked_for_depth_only_when_it_cannot_hold_surrogates() -> None:
    messages = [{"role": "user", "content": f"q{i}"} for i in range(3_000)]
    assert read_request(json.dumps({"messages": messages}).encode(), LIMITS).fields[
        "messages"] == messages
    deep: Any = "x"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    too_deep = json.dumps({"messages": [*messages, {"role": "user", "content": deep}]})
    assert _refused(too_deep.encode()).code == "GATEWAY_JSON_TOO_DEEP"
    # A lone surrogate anywhere, escaped or as is, is still found in a long history.
    for spelled in (b'"\\udc00"', b'"\\uDBFF"', '"\udc00"'.encode("utf-8", "surrogatepass")):
        raw = json.dumps({"messages": messages}).encode()[:-2] + b', {"role": "user", ' \
            b'"content": ' + spelled + b"}]}"
        assert _refused(raw).code == "GATEWAY_BAD_REQUEST", spelled


def test_skipped_fields_are_bounded_like_kept_ones() -> None:
    deep = b'{"metadata": ' + b"[" * 80 + b"]" * 80 + b"}"
    assert _refused(deep).code == "GATEWAY_JSON_TOO_DEEP"
    for raw in (b'{"x": 1e999}', b'{"x": NaN}', b'{"x": -Infinity}', b'{"x": [1, 2,]}',
                b'{"x": "\x01"}', b'{"x": "\\q"}', b'{"x": {"\\ud800": 1}}', b'{"x": 1} []'):
        assert _refused(raw).code == "GATEWAY_BAD_REQUEST", raw


def test_ignored_names_are_listed_once_in_order_and_bounded() -> None:
    document = {f"unknown-{i:03d}-" + "y" * 100: i for i in range(40)}
    document["model"] = "m"
    body = read_request(json.dumps(document).encode(), LIMITS)
    assert body.fields == {"model": "m"}
    assert len(body.ignored) == MAX_IGNORED_LISTED
    assert body.ignored[0] == ("unknown-000-" + "y" * 100)[:64]
    repeated = read_request(b'{"a": 1, "model": "m", "a": 2}', LIMITS)
    assert repeated.ignored == ("a",)
    last = read_request(b'{"model": "m", "model": "n"}', LIMITS)
    assert last.fields == {"model": "n"}  # as json: the last of a repeated key wins


def test_anthropic_base64_image_data_is_image_data_too() -> None:
    """Anthropic's image ``source`` carries its base64 in a ``data`` field: an image is
    image data there as well (known by its format's first bytes), and a text ``data`` field
    is still text."""
    small = BodyLimits(max_text_bytes=4096)
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": png}}
    for separators in ((",", ":"), (", ", ": ")):
        raw = json.dumps({"messages": [{"role": "user", "content": [block]}]},
                         separators=separators).encode()
        kept = read_request(raw, small).fields["messages"][0]["content"][0]
        assert kept["source"]["data"] == png
    text = {"type": "document", "source": {"type": "text", "data": "y" * 5000}}
    raw = json.dumps({"messages": [{"role": "user", "content": [text]}]}).encode()
    assert _refused(raw, small).code == "GATEWAY_BODY_TEXT_TOO_LARGE"
