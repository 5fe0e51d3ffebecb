"""The mkdocs hook that adds the generated reference pages (deepseek_eyes.docsgen) to the
site at build time: the command tree, the settings and the error codes are read from the
code, never pasted, and nothing generated is written into docs/. The generated errors.md
takes the place of the hand-written docs/errors.md, which is its source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from deepseek_eyes.docsgen import reference_pages


def on_files(files: Files, config: Any, **_: Any) -> Files:
    for path, markdown in reference_pages(Path(config["docs_dir"])).items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=markdown))
    return files
