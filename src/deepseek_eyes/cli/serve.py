"""``deepseek-eyes serve``: the gateway command of :mod:`deepseek_eyes.cli.ask`, with the
listening address checked first.

uvicorn reports a busy port as a log line and exit status 3; the command line promises
``error CODE: sentence`` and status 1 for every failure. The check wraps the command
instead of living in it because ``ask.py`` and the gateway belong to other work; once
``gateway.server.serve`` raises a coded error for a failed bind, this module can go.
"""

from __future__ import annotations

import copy
from typing import Any

import click

from deepseek_eyes.cli.ask import serve_command as gateway_command
from deepseek_eyes.cli.common import ensure_can_listen, loaded_settings

__all__ = ["serve_command"]


def _with_listen_check(command: click.Command) -> click.Command:
    run = command.callback
    if run is None:
        return command

    def callback(**options: Any) -> Any:
        gateway = loaded_settings(click.get_current_context()).settings.gateway
        port = options.get("port")
        ensure_can_listen(options.get("host") or gateway.host,
                          gateway.port if port is None else port)
        return run(**options)

    checked = copy.copy(command)
    checked.callback = callback
    return checked


serve_command = _with_listen_check(gateway_command)
