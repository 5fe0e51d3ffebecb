"""What every command needs: settings from ``--config``, the data home, the bridge."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.settings import LoadedSettings, load_settings
from deepseek_eyes.store.home import DataHome
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["dump_json", "loaded_settings", "open_bridge"]


def loaded_settings(ctx: click.Context) -> LoadedSettings:
    root = ctx.find_root()
    config_path: Path | None = (root.obj or {}).get("config_path")
    return load_settings(config_path)


@contextlib.asynccontextmanager
async def open_bridge(ctx: click.Context) -> AsyncIterator[VisionBridge]:
    loaded = loaded_settings(ctx)
    home = DataHome.open(loaded.settings)
    bridge = VisionBridge(loaded.settings, home)
    try:
        yield bridge
    finally:
        await bridge.aclose()
        home.close()


def dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
