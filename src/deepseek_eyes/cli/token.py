"""``deepseek-eyes token``: a bearer token every server of ours accepts (the gateway's key,
the terminal's, the browser's, the desktop's and ``vision serve``'s tokens).

256 bits from the operating system's random source (``secrets.token_urlsafe(32)``), checked
by the same rule the servers apply (:mod:`deepseek_eyes.serving.tokens`) so the command can
never print a token a server would refuse.
"""

from __future__ import annotations

import secrets

import click

from deepseek_eyes.cli.common import dump_json
from deepseek_eyes.serving.tokens import is_strong_token

__all__ = ["new_token", "token_command"]


def new_token() -> str:
    """A fresh token that passes the servers' strength rule."""
    while True:  # a random token fails the rule with a vanishing probability; draw again
        token = secrets.token_urlsafe(32)
        if is_strong_token(token):
            return token


@click.command("token")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def token_command(as_json: bool) -> None:
    """Print a fresh 256-bit bearer token for the gateway or any server.

    \b
    export DEEPSEEK_EYES_GATEWAY_KEY="$(deepseek-eyes token)"
    export DEEPSEEK_EYES_TERMINAL_TOKEN="$(deepseek-eyes token)"
    """
    token = new_token()
    click.echo(dump_json({"token": token}) if as_json else token)
