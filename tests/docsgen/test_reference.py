"""The generated reference pages (deepseek_eyes.docsgen) say what the code says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepseek_eyes.docsgen import (
    command_docs,
    commands_page,
    errors_page,
    setting_docs,
    settings_page,
)
from deepseek_eyes.docsgen.error_codes import gateway_status
from deepseek_eyes.docsgen.markdown import anchor, cell
from deepseek_eyes.errors import ERROR_CODES


def test_every_command_has_a_section_with_its_options() -> None:
    docs = command_docs()
    by_path = {d.path: d for d in docs}
    assert {"deepseek-eyes", "deepseek-eyes see", "deepseek-eyes mcp call",
            "deepseek-eyes terminal serve"} <= set(by_path)
    see = by_path["deepseek-eyes see"]
    assert {"--route", "--json", "--overlay"} <= set(see.long_options)
    assert see.json_help == "One JSON object per image, one per line."
    page = commands_page(docs)
    for doc in docs:
        assert f"\n## {doc.path}\n" in page, doc.path
    assert "(#deepseek-eyes-mcp-call)" in page  # a group links its subcommands


def test_settings_keys_carry_type_default_and_environment() -> None:
    docs = {(d.key, d.variant): d for d in setting_docs()}
    timeout = docs[("vision.routes[].timeout", "")]
    assert (timeout.type, timeout.default) == ("number", "60.0")
    assert docs[("llm.api_key", "")].env == "DEEPSEEK_API_KEY"
    assert docs[("storage.home", "")].env == "DEEPSEEK_EYES_HOME"
    assert docs[("vision.deepseek.enabled", "")].type == "boolean"
    variants = {v for (k, v) in docs if k == "mcp.servers[].oauth.type"}
    assert variants == {'type = "client_credentials"', 'type = "authorization_code"'}
    page = settings_page()
    assert "## [[vision.routes]]" in page
    assert page.count("## [vision]\n") == 1  # one section per table


def test_error_page_lists_the_registry_not_the_file(tmp_path: Path) -> None:
    """Rows come from the registry: a code the file forgot still appears, a code the
    registry dropped does not, and the file's longer note is kept."""
    source = tmp_path / "errors.md"
    source.write_text(
        "# Error codes\n\nIntro.\n\n## Gateway\n\n| code | meaning |\n| --- | --- |\n"
        "| `GATEWAY_NOT_FOUND` | No such endpoint or model (HTTP 404). |\n"
        "| `GATEWAY_NO_SUCH_CODE` | Gone. |\n", encoding="utf-8")
    page = errors_page(source)
    assert "| `GATEWAY_NOT_FOUND` | 404 | No such endpoint or model (HTTP 404). |" in page
    assert "GATEWAY_NO_SUCH_CODE" not in page
    assert "## Not yet described" in page
    assert all(f"| `{code}` |" in page for code in ERROR_CODES)


def test_gateway_status_comes_from_the_gateway() -> None:
    assert gateway_status("GATEWAY_UNAUTHORIZED") == "401"
    assert gateway_status("STORE_FULL") == "507"
    assert gateway_status("GATEWAY_RESPONSE_NOT_FOUND") == "404"
    assert gateway_status("GATEWAY_KEY_WEAK") == ""  # stops the gateway at start
    assert gateway_status("TERMINAL_PLAN_NOT_FOUND") == ""  # never a gateway answer


def test_markdown_escaping() -> None:
    assert cell("a prefix ending in *") == "a prefix ending in \\*"
    assert cell("a | b <data home>") == "a \\| b &lt;data home&gt;"
    assert anchor("deepseek-eyes mcp call") == "deepseek-eyes-mcp-call"


def test_defaults_do_not_depend_on_the_environment_the_site_is_built_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1")
    (base,) = [doc for doc in setting_docs() if doc.key == "llm.base_url"]
    assert "127.0.0.1:9" not in base.default
    assert base.env == "DEEPSEEK_BASE_URL"
    assert os.environ["DEEPSEEK_BASE_URL"] == "http://127.0.0.1:9/v1"
