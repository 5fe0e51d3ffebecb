"""Which reference pages the site gets, and where: the one list the mkdocs hook, the docs
script and the tests share."""

from __future__ import annotations

from pathlib import Path

from deepseek_eyes.docsgen.command_tree import commands_page
from deepseek_eyes.docsgen.error_codes import ERRORS_SOURCE, errors_page
from deepseek_eyes.docsgen.settings_keys import settings_page

__all__ = ["REFERENCE_PAGES", "reference_pages"]

#: The generated pages, by their path inside the docs directory.
REFERENCE_PAGES = ("reference/commands.md", "reference/settings.md", ERRORS_SOURCE)


def reference_pages(docs_dir: Path) -> dict[str, str]:
    """Path inside the site's docs directory -> Markdown, for every generated page.
    ``errors.md`` replaces the hand-written file of that name, which is its source."""
    return {
        "reference/commands.md": commands_page(),
        "reference/settings.md": settings_page(),
        ERRORS_SOURCE: errors_page(docs_dir / ERRORS_SOURCE),
    }
