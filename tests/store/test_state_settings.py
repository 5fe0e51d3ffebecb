"""Where the shared state lives: ``[store] state_url``, the environment, the password.

Pure functions and settings only (no server): what a bad value is refused with, and that a
password never sits in the file, a URL, a message or the object's display form.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepseek_eyes.errors import ConfigError, StoreError
from deepseek_eyes.settings import StoreSettings, validate_settings_text
from deepseek_eyes.settings.store import parse_state_url
from deepseek_eyes.store.state import open_shared_state, require_redis, state_target


def test_local_is_the_default_and_names_no_redis() -> None:
    state = open_shared_state(StoreSettings(), environ={})
    assert (state.backend, state.display, state.leases.shared) == ("local", "local", False)
    assert state.unavailable == "local"


@pytest.mark.parametrize(("url", "display"), [
    ("redis://127.0.0.1:6380/3", "redis://127.0.0.1:6380/3"),
    ("redis://cache.internal", "redis://cache.internal:6379/0"),
    ("rediss://eyes@cache.internal:6390/", "rediss://cache.internal:6390/0"),
    ("redis://[::1]:7000/15", "redis://[::1]:7000/15"),
])
def test_redis_urls_parse_to_a_target_without_secrets(url: str, display: str) -> None:
    target = parse_state_url(url)
    assert target.kind == "redis"
    assert target.display() == display


@pytest.mark.parametrize(("url", "reason"), [
    ("redis://:hunter2@cache:6379/0", "password"),
    ("redis://eyes:hunter2@cache:6379/0", "password"),
    ("redis://cache:6379/0?password=hunter2", "query"),
    ("redis://cache:6379/0#hunter2", "query"),
    ("redis://cache:6379/16", "0-15"),
    ("redis://cache:6379/zero", "0-15"),
    ("redis://cache:notaport/0", "port"),
    ("redis:///0", "host"),
    ("http://cache:6379/0", "redis://"),
    ("postgresql://db/eyes", "redis://"),
    ("", "redis://"),
])
def test_bad_urls_are_refused_without_repeating_them(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        parse_state_url(url)
    assert "hunter2" not in str(caught.value)


def test_the_file_refuses_a_password_at_its_path(tmp_path: Path) -> None:
    text = '[store]\nstate_url = "redis://:hunter2@cache:6379/0"\n'
    with pytest.raises(ConfigError) as caught:
        validate_settings_text(text, tmp_path / "deepseek-eyes.toml")
    assert caught.value.code == "CONFIG_INVALID"
    (error,) = caught.value.details["errors"]
    assert error["path"] == "store.state_url"
    assert "password" in error["message"]
    assert "hunter2" not in repr(caught.value.details)


def test_the_file_refuses_a_literal_password_and_unknown_keys(tmp_path: Path) -> None:
    text = ('[store]\nstate_password = "hunter2"\nstate_unavailable = "maybe"\n'
            "state_timeout = 0\n")
    with pytest.raises(ConfigError) as caught:
        validate_settings_text(text, tmp_path / "deepseek-eyes.toml")
    paths = sorted(e["path"] for e in caught.value.details["errors"])
    assert paths == ["store.state_password", "store.state_timeout", "store.state_unavailable"]


def test_the_environment_wins_and_is_checked_with_its_own_code() -> None:
    settings = StoreSettings(state_url="redis://from-file:6379/1")
    assert state_target(settings, {}).host == "from-file"
    env = {"DEEPSEEK_EYES_STATE_URL": "redis://from-env:6379/2"}
    assert state_target(settings, env).display() == "redis://from-env:6379/2"
    assert state_target(settings, {"DEEPSEEK_EYES_STATE_URL": "local"}).kind == "local"
    with pytest.raises(ConfigError) as caught:
        state_target(settings, {"DEEPSEEK_EYES_STATE_URL": "redis://:hunter2@h/0"})
    assert caught.value.code == "CONFIG_STATE_URL_INVALID"
    assert "hunter2" not in str(caught.value)


def test_a_password_reference_must_resolve() -> None:
    settings = StoreSettings.model_validate(
        {"state_url": "redis://127.0.0.1:1/0", "state_password": {"env": "EYES_REDIS_PW"}})
    with pytest.raises(ConfigError) as caught:
        open_shared_state(settings, environ={})
    assert caught.value.code == "CONFIG_ENV_MISSING"
    state = open_shared_state(settings, environ={"EYES_REDIS_PW": "hunter2"})
    assert state.backend == "redis"
    assert state.connection is not None
    assert state.connection._password == "hunter2"
    assert "hunter2" not in state.display


def test_without_a_reference_the_password_variable_is_read() -> None:
    settings = StoreSettings(state_url="redis://127.0.0.1:1/0")
    state = open_shared_state(settings, environ={"DEEPSEEK_EYES_STATE_PASSWORD": "pw2"})
    assert state.connection is not None
    assert state.connection._password == "pw2"
    assert open_shared_state(settings, environ={}).connection._password is None  # type: ignore[union-attr]


def test_a_missing_redis_package_has_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "redis" or m.startswith("redis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis -> ImportError
    with pytest.raises(StoreError) as caught:
        require_redis()
    assert caught.value.code == "STORE_STATE_BACKEND_MISSING"
    with pytest.raises(StoreError, match="redis package"):
        open_shared_state(StoreSettings(state_url="redis://127.0.0.1:1/0"), environ={})
