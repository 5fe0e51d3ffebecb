"""The MCP host: connects configured MCP servers through the official SDK and exposes only
what it has bounded, allowed and audited.

Modules: ``names`` (stable public names), ``policy`` (selectors, risk classes, budgets),
``catalog`` (bounded discovery into immutable generations), ``admission`` (iterative result
limits), ``results`` (canonical hash, preview, artifacts, image blobs), ``audit``,
``oauth`` (client_credentials), ``manager`` (lifecycle, catalogs), ``liveness`` (is a
connected server still there, asked per transport and revision), ``host`` (exposure and
dispatch), ``importer`` (other hosts' MCP JSON), ``settings_file`` (validated edits of the
settings file), ``running`` (a short-lived host for the CLI). Import from the submodules;
this package imports nothing heavy.
"""

__all__: list[str] = []
