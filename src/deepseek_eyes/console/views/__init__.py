"""What the web console reads from a data directory: conversations, their images with
evidence and attempts, the audit chain's head, usage by category.

Read-only and bounded: every list has a limit, every text a length cap (``MAX_TEXT``, the
rest said as ``truncated``), so a session with a huge tool result or thousands of events
costs the page a bounded answer. The answers are JSON leaving the process (plain dicts);
the page renders every string with ``textContent``, whatever it holds.

One module per view, this package's surface re-exported here (the console's app reads
``views.conversation``, ``views.audit_search``, …):

* :mod:`.listing`: the conversations list (paged) and a conversation's fork tree;
* :mod:`.conversation`: one conversation, its messages, turns and images;
* :mod:`.images`: image sizes and one image's provenance, asked for as it comes on screen;
* :mod:`.screens`: a conversation's browser and desktop steps;
* :mod:`.audit`: the chain's head, the MCP and vision search, a record by id;
* :mod:`.usage`: usage by category, day and model;
* :mod:`.scope` and :mod:`.shown`: what the views share (which login sees what; how a
  stored message is shown, bounded).

Why the evidence comes from ``audit show``'s walk
(:func:`deepseek_eyes.audit.show.image_provenance`) rather than a query of its own: an
image's provenance is already resolved there, and the console shows exactly what ``audit
show TURN`` would.
"""

from __future__ import annotations

from deepseek_eyes.console.views.audit import (
    MAX_AUDIT_ROWS,
    audit_head,
    audit_record,
    audit_search,
)
from deepseek_eyes.console.views.conversation import conversation
from deepseek_eyes.console.views.images import image_meta, provenance
from deepseek_eyes.console.views.listing import conversations, fork_tree
from deepseek_eyes.console.views.scope import image_in_scope, in_scope, require_scope
from deepseek_eyes.console.views.screens import screens
from deepseek_eyes.console.views.shown import CLIENTS, MAX_TEXT
from deepseek_eyes.console.views.usage import usage_view

__all__ = [
    "CLIENTS",
    "MAX_AUDIT_ROWS",
    "MAX_TEXT",
    "audit_head",
    "audit_record",
    "audit_search",
    "conversation",
    "conversations",
    "fork_tree",
    "image_in_scope",
    "image_meta",
    "in_scope",
    "provenance",
    "require_scope",
    "screens",
    "usage_view",
]
