"""Where the browser may go, and the [browser] settings that say so."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deepseek_eyes.browser.policy import NavigationPolicy
from deepseek_eyes.errors import BrowserPolicyError
from deepseek_eyes.settings import BrowserSettings, Settings


def test_http_and_https_only_by_default() -> None:
    policy = NavigationPolicy.from_settings(BrowserSettings())
    assert policy.refusal("https://example.org/") is None
    assert "private network" in (policy.refusal("http://127.0.0.1:8080/x") or "")
    opened = NavigationPolicy.from_settings(BrowserSettings(allow_private_network=True))
    assert opened.refusal("http://127.0.0.1:8080/x") is None
    assert policy.refusal("about:blank") is None
    for url in ("file:///etc/passwd", "javascript:alert(1)", "ftp://example.org/",
                "chrome://settings", "data:text/html,hi", "view-source:http://x/"):
        assert policy.refusal(url) is not None, url
    with pytest.raises(BrowserPolicyError) as refused:
        policy.check("file:///etc/passwd")
    assert refused.value.code == "BROWSER_NAVIGATION_BLOCKED"


def test_sub_resources_may_be_inline_but_not_local_files() -> None:
    policy = NavigationPolicy()
    assert policy.refusal("data:image/png;base64,AA", navigation=False) is None
    assert policy.refusal("blob:http://x/1", navigation=False) is None
    assert policy.refusal("file:///etc/passwd", navigation=False) is not None


def test_allow_and_deny_lists() -> None:
    policy = NavigationPolicy.from_settings(BrowserSettings(
        allow_hosts=("docs.example.org", "*.test", "127.0.0.1:8000"),
        deny_hosts=("secret.test",)))
    assert policy.refusal("https://docs.example.org/a") is None
    assert policy.refusal("https://api.shop.test/") is None
    assert policy.refusal("https://test/") is not None  # *.test is subdomains only
    assert policy.refusal("https://secret.test/") is not None  # deny wins
    assert policy.refusal("http://127.0.0.1:8000/") is None
    assert policy.refusal("http://127.0.0.1:8001/") is not None
    assert policy.refusal("https://evil.example.org/") is not None
    # The allow list holds sub-resources too; a CDN is named in allow_subresource_hosts.
    assert policy.refusal("https://cdn.example.net/x.js", navigation=False) is not None
    assert policy.refusal("https://secret.test/x.js", navigation=False) is not None
    cdn = NavigationPolicy.from_settings(BrowserSettings(
        allow_hosts=("docs.example.org",), allow_subresource_hosts=("cdn.example.net",)))
    assert cdn.refusal("https://cdn.example.net/x.js", navigation=False) is None
    assert cdn.refusal("https://cdn.example.net/", navigation=True) is not None


def test_credentials_in_urls_are_refused() -> None:
    assert NavigationPolicy().refusal("https://user:pw@example.org/") is not None


def test_settings_are_strict() -> None:
    settings = Settings.model_validate({"browser": {"visual_mode": "manual",
                                                    "allow_hosts": ["Docs.Example.org"]},
                                        "runtime": {"tool_sources": ["look", "browser"]}})
    assert settings.browser.allow_hosts == ("docs.example.org",)
    for bad in ({"visual_mode": "sometimes"}, {"allow_hosts": ["http://x/"]},
                {"allowed_schemes": ["javascript"]}, {"max_tabs": 0}, {"headles": True},
                {"deny_hosts": ["0x7f.1"]}, {"allow_subresource_hosts": ["a..b"]},
                {"max_dialogs_per_minute": 0}):
        with pytest.raises(ValidationError):
            BrowserSettings.model_validate(bad)
