"""Issue #37 item 4: credential shapes that slipped past the checks, each refused both ways.

Through ``mcp register`` (the real command, in process: ``MCP_CREDENTIAL_IN_ARGUMENTS`` with
its fix, nothing written) and through the settings loader (a real TOML file:
``CONFIG_INVALID`` naming the field, with the ``{ env = … }`` fix). The value never appears
in what either says. Look-alikes still load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.cli import main
from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import load_settings

SECRET = "pw1234abcdXYZ"
KEY = "sk-abcdefghijklmnopqrstuv"

#: (register's arguments after the id, the [[mcp.servers]] entry the loader gets)
STDIO_SHAPES: list[list[str]] = [
    ["npx", "mcp-remote", f"https://x.example/mcp/{KEY}/"],
    ["npx", "srv", "--endpoint", f"https://x.example/mcp?api_key={SECRET}"],
    ["npx", "mcp-remote", "https://x.example/mcp", "--header", f"X-Api-Key: {SECRET}"],
    ["npx", "srv", f"--header=X-Auth-Token: {SECRET}"],
    ["npx", "srv", "-H", f"Cookie: session={SECRET}"],
    ["npx", "srv", "--header", f"x-goog-api-key:{SECRET}"],
    ["uvx", "mcp-server-postgres", f"postgres://app:{SECRET}@db.example/app"],
    ["uvx", "mysql-mcp", "--user", "app", "-p", SECRET],
    ["mysql", "-uapp", f"-p{SECRET}"],
    ["npx", "srv", "--password", SECRET],
    ["npx", "srv", f"--password={SECRET}"],
    ["npx", "srv", "--cookie", f"sid={SECRET}"],
    ["npx", "srv", f"--cookie=sid={SECRET}"],
    ["uvx", "pg-mcp", f"host=db user=app password={SECRET}"],
]
URL_SHAPES = [f"https://x.example/mcp/{KEY}/", f"https://x.example/mcp?api_key={SECRET}",
              f"https://x.example/mcp?q={KEY}"]
#: ``--header NAME=VAR`` takes a variable name after the ``=``; a value that is no variable
#: name under a credential header's name is a literal credential however short.
HEADER_SHAPES = [f"X-Api-Key: {SECRET}", f"X-Api-Key={SECRET}-1", f"Cookie: sid={SECRET}",
                 "X-Auth-Token=ab.cd"]


def register(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    with pytest.raises(SystemExit) as done:
        main(["--config", str(config), "mcp", "register", "leak", "--json", *args])
    out = capsys.readouterr()
    assert done.value.code == 1, out
    answer: dict[str, Any] = json.loads(out.out)
    return answer["error"]


def load(tmp_path: Path, entry: dict[str, Any]) -> ConfigError:
    path = tmp_path / "loaded.toml"
    lines = ["[[mcp.servers]]", *(f"{k} = {json.dumps(v)}" for k, v in entry.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    return refused.value


def silent(text: str) -> str:
    assert SECRET not in text
    assert "ab.cd" not in text
    assert KEY not in text
    return text


@pytest.mark.parametrize("argv", STDIO_SHAPES, ids=lambda a: " ".join(a)[:40])
def test_stdio_shapes_are_refused_by_register_and_the_loader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text("# mine\n", encoding="utf-8")
    error = register(config, capsys, "--", *argv)
    assert error["code"] == "MCP_CREDENTIAL_IN_ARGUMENTS", error
    assert "{ env = " in silent(json.dumps(error))
    assert config.read_text() == "# mine\n"  # nothing was written

    refused = load(tmp_path, {"id": "srv", "transport": "stdio", "command": argv[0],
                              "args": argv[1:]})
    assert refused.code == "CONFIG_INVALID"
    text = silent(refused.message + json.dumps(refused.details))
    assert "mcp.servers[0]" in text
    assert "{ env = " in text


@pytest.mark.parametrize("url", URL_SHAPES)
def test_url_shapes_are_refused_by_register_and_the_loader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    config = tmp_path / "eyes.toml"
    error = register(config, capsys, "--url", url)
    assert error["code"] == "MCP_CREDENTIAL_IN_ARGUMENTS", error
    silent(json.dumps(error))
    assert not config.exists()
    refused = load(tmp_path, {"id": "web", "transport": "streamable-http", "url": url})
    text = silent(refused.message + json.dumps(refused.details))
    assert "mcp.servers[0].url" in text
    assert "{ env = " in text


@pytest.mark.parametrize("header", HEADER_SHAPES)
def test_register_header_literals_are_credentials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str) -> None:
    config = tmp_path / "eyes.toml"
    error = register(config, capsys, "--url", "https://x.example/mcp", "--header", header)
    assert error["code"] == "MCP_CREDENTIAL_IN_ARGUMENTS", error
    assert "{ env = \\\"VAR\\\" }" in silent(json.dumps(error))
    assert not config.exists()


@pytest.mark.parametrize("argv", [
    ["npx", "-y", "-p", "some-package", "srv"],
    ["docker", "run", "-p", "8080:80", "image"],
    ["srv", "-p", "/srv/data"],
    ["srv", "--header", "Content-Type: application/json"],
    ["srv", "--header", "X-Api-Key: ${SRV_KEY}"],
    ["srv", "--cookie-jar", "/srv/jar"],
    ["srv", "--no-cookies", "serve"],
    ["psql-mcp", "postgres://app@db.example/app"],
    ["srv", "https://h.example/token/mcp"],
])
def test_look_alikes_register_and_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    config = tmp_path / "eyes.toml"
    main(["--config", str(config), "mcp", "register", "fine", "--json", "--", *argv])
    assert json.loads(capsys.readouterr().out)["server"]["args"] == argv[1:]
    assert load_settings(config).settings.mcp.servers[0].args == tuple(argv[1:])
