"""Usage as the console charts it: by category (exact provider usage, estimates and avoided
replay, counters kept apart, as ``deepseek-eyes usage`` shows them), per day, per model,
and the upstream cache's share per day.
"""

from __future__ import annotations

import time
from typing import Any

from deepseek_eyes.store.db import Database
from deepseek_eyes.usage import UsageTracker

__all__ = ["usage_view"]



def usage_view(db: Database, *, days: int = 30) -> dict[str, Any]:
    """Usage by category (exact provider usage, estimates and avoided replay, counters kept
    apart, as ``deepseek-eyes usage`` shows them), and per day and category for ``days``."""
    since = time.time() - days * 86400
    daily = db.query(
        "SELECT date(ts, 'unixepoch') AS day, category, exact, SUM(calls),"
        " SUM(prompt_tokens + completion_tokens), SUM(cache_hit_tokens),"
        " SUM(estimated_tokens) FROM usage WHERE ts >= ? GROUP BY day, category"
        " ORDER BY day, category", (since,))
    models = db.query(
        "SELECT COALESCE(model, '-'), SUM(calls), SUM(prompt_tokens), SUM(completion_tokens),"
        " SUM(cache_hit_tokens) FROM usage WHERE ts >= ? AND exact = 1 GROUP BY model"
        " ORDER BY SUM(prompt_tokens + completion_tokens) DESC LIMIT 20", (since,))
    cache = db.query(
        "SELECT date(ts, 'unixepoch') AS day, SUM(prompt_tokens), SUM(cache_hit_tokens)"
        " FROM usage WHERE ts >= ? AND exact = 1 GROUP BY day ORDER BY day", (since,))
    return {
        "days": days,
        "summary": UsageTracker(db).summary(),
        "daily": [{"day": r[0], "category": r[1], "exact": bool(r[2]), "calls": r[3],
                   "tokens": r[4], "cache_hit_tokens": r[5], "estimated_tokens": r[6],
                   # the chart's three kinds: what the provider billed, what was
                   # estimated of it, and what was not sent at all
                   "kind": "exact" if r[2] else (
                       "avoided" if r[1] == "avoided_replay" else "estimated")}
                  for r in daily],
        "models": [{"model": r[0], "calls": r[1], "prompt_tokens": r[2],
                    "completion_tokens": r[3], "cache_hit_tokens": r[4]} for r in models],
        "cache_daily": [{"day": r[0], "prompt_tokens": r[1], "cache_hit_tokens": r[2],
                         "share": round(r[2] / r[1], 4) if r[1] else None} for r in cache],
    }
