"""The documentation site's reference pages, generated from the code at build time.

The command tree comes from click, the settings from the pydantic settings model and the
error codes from :data:`deepseek_eyes.errors.ERROR_CODES`: written by hand in three places,
they drifted; generated, a command, key or code cannot be missing from the site. The mkdocs
hook (``scripts/docs_hooks.py``) asks :func:`reference_pages` for the pages and adds them to
the build; nothing generated is committed.

One decision a newcomer might undo: the error page keeps ``docs/errors.md`` as its source of
grouping and longer notes (other tests pin that file to the registry), but its rows come from
the registry, so a code the file forgot still appears (under "Not yet described").
"""

from __future__ import annotations

from deepseek_eyes.docsgen.command_tree import CommandDoc, command_docs, commands_page
from deepseek_eyes.docsgen.error_codes import ERRORS_SOURCE, errors_page
from deepseek_eyes.docsgen.pages import REFERENCE_PAGES, reference_pages
from deepseek_eyes.docsgen.settings_keys import SettingDoc, setting_docs, settings_page

__all__ = [
    "ERRORS_SOURCE",
    "REFERENCE_PAGES",
    "CommandDoc",
    "SettingDoc",
    "command_docs",
    "commands_page",
    "errors_page",
    "reference_pages",
    "setting_docs",
    "settings_page",
]
