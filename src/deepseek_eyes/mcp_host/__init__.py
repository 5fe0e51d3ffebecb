"""The MCP host: connects configured MCP servers through the official SDK and exposes only
what it has bounded, allowed and audited.

Modules: ``names`` (stable public names), ``policy`` (selectors, risk classes, budgets),
``catalog`` (bounded discovery into immutable generations), ``admission`` (iterative result
limits), ``results`` (canonical hash, preview, artifacts, image blobs), ``audit``,
``oauth`` (client_credentials, and authorization code for connections), ``signin`` (``mcp
login``'s flow), ``redirect`` (the loopback listener of a sign-in), ``tokens`` (the 0600
token store), ``manager`` (lifecycle, catalogs), ``state`` (one server's state and view),
``liveness`` (is a connected server still there, asked per transport and revision),
``faults`` (messages that are not JSON-RPC), ``events`` (status changes as a stream),
``host`` (exposure and dispatch), ``content`` (the shared resource and prompt tools: when
each is offered, the resource list's pages), ``discovery``, ``planes`` and ``closing``
(each plane listed and folded in on its own; bounded closes), ``redact`` (secrets scrubbed
from what a server says), ``stderr_log`` (a stdio server's stderr in a rotated file),
``review`` (flags in what the model reads), ``importer`` (other hosts' MCP JSON),
``registration`` (an entry from flags), ``credentials`` (credentials on a command line
refused), ``settings_file`` (validated, comment-keeping edits of the settings file),
``running`` (a short-lived host for the CLI, with only the servers a command needs). Import
from the submodules; this package imports nothing heavy.
"""

__all__: list[str] = []
