"""The settings file ``deepseek-eyes init`` writes: every part a first run needs, commented.

The text is one literal, not rendered from the models, so that its comments read like the
README's and a person can follow it from top to bottom; a test loads it through the strict
model (``config check`` must accept it as written), so it cannot drift into an invalid file.
Only the upstream is live; the remote vision route and the MCP server are commented
examples, because a route without its key or a server without its command would fail.

The file is created exclusively (``O_EXCL``): an existing file, a settings file someone
edited, is never replaced (``CONFIG_FILE_EXISTS``).
"""

from __future__ import annotations

import os
from pathlib import Path

from deepseek_eyes.errors import ConfigError

__all__ = ["STARTER_SETTINGS", "write_starter_settings"]

STARTER_SETTINGS = """\
# DeepSeekEyes settings, written by `deepseek-eyes init`.
# Check them with `deepseek-eyes config check PATH`; every key is in the README.
# Secrets are never written here: a key is { env = "NAME" }, read when it is first used.

# The final model: DeepSeek's OpenAI-compatible API. Whether a model sees is learned, not
# assumed: the model is asked once a day with a tiny pixel probe (`deepseek-eyes models`
# shows what was learned). One that sees (deepseek-flash) gets the pixels of your images;
# a text-only one (deepseek-v4-pro, a self-hosted DeepSeek) gets validated evidence.
[llm]
base_url = "https://api.deepseek.com"
model = "deepseek-flash"
api_key = { env = "DEEPSEEK_API_KEY" }   # export DEEPSEEK_API_KEY=sk-...

# Vision for a model that does not see: DeepSeek's own eyes ("deepseek": deepseek-flash on
# the upstream above, with the same key), then the embedded local OCR ("local"), which
# works offline. To stay offline and send no image anywhere:
#   route_priority = ["local"]
[vision]
route_priority = ["deepseek", "local"]
delivery = "auto"   # "evidence": never send pixels; "both": pixels and evidence together
#
# To add another vision model, uncomment this route and put "qwen" first in the
# route_priority above:
# [[vision.routes]]
# name = "qwen"
# base_url = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
# model = "qwen-vl-max"
# api_key = { env = "DASHSCOPE_API_KEY" }

# The OpenAI-compatible gateway (`deepseek-eyes serve`). Clients send this key as their
# API key; make one with: export DEEPSEEK_EYES_GATEWAY_KEY="$(deepseek-eyes token)"
[gateway]
host = "127.0.0.1"
port = 8765
api_key = { env = "DEEPSEEK_EYES_GATEWAY_KEY" }

# An MCP server whose tools the model may use (nothing is exposed until `allow` names it).
# `deepseek-eyes mcp register` and `mcp import` write these entries for you.
# [[mcp.servers]]
# id = "time"
# transport = "stdio"
# command = "uvx"
# args = ["mcp-server-time"]
# allow = { tools = ["get_current_time", "convert_time"] }
"""


def write_starter_settings(path: Path) -> None:
    """Create ``path`` holding :data:`STARTER_SETTINGS`; its directory must exist.

    Raises:
        ConfigError: ``CONFIG_FILE_EXISTS`` when something is already at ``path`` (it is
            left as it was); ``CONFIG_WRITE_FAILED`` when it cannot be created (no such
            directory, no permission).
    """
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise ConfigError(
            f"{path} already exists; it was left as it is (remove it, or name another path)",
            code="CONFIG_FILE_EXISTS", details={"path": str(path)},
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot create {path}: {exc.strerror}", code="CONFIG_WRITE_FAILED",
            details={"path": str(path)},
        ) from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(STARTER_SETTINGS)
