"""Writing down what someone else controls: the untrusted fence and secret redaction.

Two jobs, one module each, shared by every capability that shows a model text it did not
write (the browser's pages, the desktop's windows):

* :mod:`~deepseek_eyes.untrusted.fence` — :func:`quote` makes a foreign string one inert
  JSON literal (invisible and bidirectional controls escaped, the fence's own delimiter
  broken up), and :func:`fence` wraps lines in the block a model is told is data.
* :mod:`~deepseek_eyes.untrusted.redact` — :func:`redact_url` is the one function that
  writes a URL anywhere (observations, reports, events, audit details): query values,
  fragments and user info become short keyed hashes.
"""

from deepseek_eyes.untrusted.fence import (
    FENCE_MARK,
    escape_controls,
    fence,
    fence_end,
    fence_start,
    quote,
)
from deepseek_eyes.untrusted.redact import (
    masked,
    redact_url,
    redact_url_part,
    redact_urls_in,
    secret_digest,
)

__all__ = [
    "FENCE_MARK",
    "escape_controls",
    "fence",
    "fence_end",
    "fence_start",
    "masked",
    "quote",
    "redact_url",
    "redact_url_part",
    "redact_urls_in",
    "secret_digest",
]
