"""``vision serve``: the eyes as an MCP server for any MCP host.

``see`` and ``look`` over the same vision bridge as the command line (cached, audited),
stored evidence as ``evidence://sha256/<hash>`` resources, and the paths a client may name
limited to the served roots. Over stdio, or Streamable HTTP behind ``serving``'s bearer
token and Host/Origin rules.
"""

from deepseek_eyes.vision_server.roots import ServedRoots, roots_from_uris
from deepseek_eyes.vision_server.schemas import output_schema
from deepseek_eyes.vision_server.server import EVIDENCE_URI_PREFIX, build_vision_server
from deepseek_eyes.vision_server.service import VisionService

__all__ = [
    "EVIDENCE_URI_PREFIX",
    "ServedRoots",
    "VisionService",
    "build_vision_server",
    "output_schema",
    "roots_from_uris",
]
