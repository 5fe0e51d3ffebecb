from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import (
    SecretRef,
    Settings,
    StorageSettings,
    data_home,
    load_settings,
    validate_settings_file,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_no_file_gives_defaults_with_local_route(tmp_path: Path) -> None:
    loaded = load_settings()
    assert loaded.source is None
    assert loaded.settings.vision.routes == ()
    assert loaded.settings.image.max_bytes == 20 * 1024 * 1024
    assert loaded.settings.image.max_pixels == 40_000_000


def test_defaults_build_a_section_on_first_read_and_equal_settings() -> None:
    """No file: only the sections read are built, and whatever reads the whole (dump,
    compare, copy, pickle, repr) sees exactly ``Settings()``."""
    import copy
    import pickle

    loaded = load_settings()
    lazy = loaded.settings
    assert lazy.__dict__ == {}
    assert lazy.image.max_bytes == 20 * 1024 * 1024
    assert set(lazy.__dict__) == {"image"}
    assert lazy.model_fields_set == set()
    with pytest.raises(AttributeError):
        lazy.no_such_section  # noqa: B018
    full = Settings()
    assert Settings.defaults() == full
    assert full == Settings.defaults()
    assert Settings.defaults().model_dump() == full.model_dump()
    assert Settings.defaults().model_dump_json() == full.model_dump_json()
    assert repr(Settings.defaults()) == repr(full)
    assert dict(Settings.defaults()) == dict(full)
    assert pickle.loads(pickle.dumps(Settings.defaults())) == full  # noqa: S301 (our bytes)
    assert copy.deepcopy(Settings.defaults()) == full
    assert copy.copy(Settings.defaults()) == full
    for settings in (full, Settings.defaults()):
        with pytest.raises(TypeError):
            hash(settings)  # as before: sections hold dicts
    moved = Settings.defaults().model_copy(update={"storage": StorageSettings(home=Path("/x"))})
    assert moved.storage.home == Path("/x")
    assert moved.mcp == full.mcp


def test_working_directory_file_is_found(tmp_path: Path) -> None:
    write(tmp_path / "deepseek-eyes.toml", "[vision]\nfailover_attempts = 1\n")
    loaded = load_settings()
    assert loaded.source == tmp_path / "deepseek-eyes.toml"
    assert loaded.settings.vision.failover_attempts == 1


def test_user_config_dir_is_second(tmp_path: Path) -> None:
    user_dir = tmp_path / "xdg-config" / "deepseek-eyes"
    user_dir.mkdir(parents=True)
    write(user_dir / "deepseek-eyes.toml", "[vision]\nprobe = false\n")
    assert load_settings().settings.vision.probe is False


def test_explicit_config_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "missing.toml")
    assert info.value.code == "CONFIG_NOT_FOUND"


def test_bad_toml_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path / "x.toml", "[vision\n"))
    assert info.value.code == "CONFIG_UNREADABLE"


def test_literal_secret_is_refused_with_its_path(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.toml",
        """
[[vision.routes]]
name = "qwen"
base_url = "https://dashscope.example/compatible-mode/v1"
model = "qwen-vl-max"
api_key = "sk-live-123"
""",
    )
    with pytest.raises(ConfigError) as info:
        validate_settings_file(path)
    assert info.value.code == "CONFIG_INVALID"
    errors = info.value.details["errors"]
    assert errors[0]["path"] == "vision.routes[0].api_key"
    assert "env" in errors[0]["message"]
    assert "sk-live-123" not in str(info.value.details)


def test_every_error_is_reported_with_a_path(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.toml",
        """
[image]
max_bytes = -1
[vision]
failover_atempts = 3
route = "nowhere"
[[vision.routes]]
name = "a"
kind = "openai"
""",
    )
    with pytest.raises(ConfigError) as info:
        validate_settings_file(path)
    paths = {e["path"] for e in info.value.details["errors"]}
    assert "image.max_bytes" in paths
    assert "vision.failover_atempts" in paths
    assert "vision.routes[0]" in paths


def test_env_reference_resolves_only_at_use(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = SecretRef(env="MY_ROUTE_KEY")
    with pytest.raises(ConfigError) as info:
        ref.resolve()
    assert info.value.code == "CONFIG_ENV_MISSING"
    monkeypatch.setenv("MY_ROUTE_KEY", "value")
    assert ref.resolve() == "value"


def test_data_home_prefers_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_EYES_HOME", str(tmp_path / "a"))
    settings = Settings.model_validate({"storage": {"home": str(tmp_path / "b")}})
    assert data_home(settings) == tmp_path / "a"
    monkeypatch.delenv("DEEPSEEK_EYES_HOME")
    assert data_home(settings) == tmp_path / "b"


def test_duplicate_route_names_refused() -> None:
    with pytest.raises(ValueError, match="used twice"):
        Settings.model_validate(
            {"vision": {"routes": [{"name": "x", "kind": "local"}, {"name": "x", "kind": "local"}]}}
        )


def test_url_with_user_info_refused() -> None:
    with pytest.raises(ValueError, match="user information"):
        Settings.model_validate(
            {"vision": {"routes": [{"name": "x", "base_url": "https://u:p@h/v1", "model": "m"}]}}
        )


def test_keys_never_travel_over_plain_http_to_remote_hosts() -> None:
    route = {"name": "x", "model": "m", "api_key": {"env": "K"}}
    with pytest.raises(ValueError, match="https"):
        Settings.model_validate(
            {"vision": {"routes": [{**route, "base_url": "http://vision.example/v1"}]}}
        )
    for url in ("http://127.0.0.1:8000/v1", "http://localhost/v1", "https://vision.example/v1"):
        Settings.model_validate({"vision": {"routes": [{**route, "base_url": url}]}})
    # Without a credential, a LAN server over http is fine (an Ollama box, say).
    Settings.model_validate(
        {"vision": {"routes": [{"name": "x", "model": "m", "base_url": "http://10.0.0.5/v1"}]}}
    )


def test_unknown_key_names_the_closest_known_one(tmp_path: Path) -> None:
    path = write(
        tmp_path / "typo.toml",
        """
[vision]
route_priorty = ["local"]
[[vision.routes]]
name = "q"
base_url = "https://h/v1"
model = "m"
api_kye = { env = "Q_KEY" }
[gatway]
port = 1
[storage]
zzzz = 1
""",
    )
    with pytest.raises(ConfigError) as info:
        validate_settings_file(path)
    messages = {e["path"]: e["message"] for e in info.value.details["errors"]}
    assert messages["vision.route_priorty"].endswith("did you mean `route_priority`?")
    assert messages["vision.routes[0].api_kye"].endswith("did you mean `api_key`?")
    assert messages["gatway"].endswith("did you mean `gateway`?")
    assert "did you mean" not in messages["storage.zzzz"]  # nothing close: no guess


def test_gateway_drain_timeout_defaults_to_30_seconds_and_must_be_positive(
        tmp_path: Path) -> None:
    assert Settings().gateway.drain_timeout == 30.0
    ok = validate_settings_file(write(tmp_path / "ok.toml", "[gateway]\ndrain_timeout = 2.5\n"))
    assert ok.gateway.drain_timeout == 2.5
    for bad in ("0", "-1", '"soon"'):
        path = write(tmp_path / "bad.toml", f"[gateway]\ndrain_timeout = {bad}\n")
        with pytest.raises(ConfigError) as info:
            validate_settings_file(path)
        assert info.value.code == "CONFIG_INVALID"
        assert [e["path"] for e in info.value.details["errors"]] == ["gateway.drain_timeout"]
