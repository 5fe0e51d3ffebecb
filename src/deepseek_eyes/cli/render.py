"""Human-readable rendering of evidence and route tables (no logic, only layout)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepseek_eyes.vision.routing.guard import ProbeReport, RouteStatus
    from deepseek_eyes.vision.routing.router import Acquisition

__all__ = ["render_evidence", "render_routes"]

MAX_LINES = 40


def _box(bbox: Any) -> str:
    if not isinstance(bbox, list):
        return ""
    x, y, w, h = bbox
    return f"@({x:.2f},{y:.2f} {w:.2f}x{h:.2f})"


def _section(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    shown = items[:MAX_LINES]
    out = [f"  {title} ({len(items)})"]
    out.extend(f"    {item}" for item in shown)
    if len(items) > MAX_LINES:
        out.append(f"    … {len(items) - MAX_LINES} more (use --json for all)")
    return out


def render_evidence(path: Path, acquisition: Acquisition) -> str:
    meta = acquisition.image
    record = acquisition.record
    ev = record.evidence
    state = "cached" if acquisition.cached else "fresh"
    lines = [
        f"{path}",
        f"  image    sha256:{meta.sha256[:16]}…  {meta.width}x{meta.height}  {meta.media_type}",
        f"  route    {record.route} ({record.model or 'unknown model'}), {state}",
    ]
    if "summary" in ev:
        lines.append(f"  summary  {ev['summary']}")
    else:
        lines.append(f"  answer   {ev.get('answer', '')}")
    lines += _section(
        "text", [f"{o['confidence']:.2f}  {o['text']}" for o in ev.get("ocr", [])]
    )
    lines += _section(
        "regions",
        [f"{r['id']} {r['kind']}: {r['label']} {_box(r['bbox'])}" for r in ev.get("regions", [])],
    )
    lines += _section(
        "objects", [f"{o['id']} {o['label']} {_box(o['bbox'])}" for o in ev.get("objects", [])]
    )
    lines += _section(
        "relations",
        [f"{r['subject']} {r['predicate']} {r['object']}" for r in ev.get("relations", [])],
    )
    lines += _section(
        "numbers",
        [
            f"{q['label'] or '(no label)'} = {q['value']:g}{(' ' + q['unit']) if q['unit'] else ''}"
            for q in ev.get("quantitative_facts", [])
        ],
    )
    lines += _section(
        "observations", [f"{o['text']} {_box(o['bbox'])}" for o in ev.get("observations", [])]
    )
    lines += _section(
        "uncertainties", [f"{u['topic']}: {u['reason']}" for u in ev.get("uncertainties", [])]
    )
    if record.repairs:
        kinds = sorted({r["kind"] for r in record.repairs})
        lines.append(f"  repairs  {', '.join(kinds)}")
    return "\n".join(lines)


def render_routes(status: list[RouteStatus], probes: list[ProbeReport] | None) -> str:
    header = ("ORDER", "NAME", "KIND", "MODEL", "HEALTH", "CIRCUIT", "PROBE")
    rows = [header]
    for route in status:
        health = route["health"] + (f" {route['health_code']}" if route["health_code"] else "")
        circuit = route["circuit"] + (
            f" {route['circuit_open_for_s']}s" if route["circuit"] == "open" else ""
        )
        rows.append((
            str(route["order"] or "-"), route["name"], route["kind"], route["model"] or "-",
            health, circuit, route["probe"],
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if probes is not None:
        out.append("")
        for probe in probes:
            verdict = "ok" if probe["ok"] else f"failed {probe['code']}"
            detail = f" ({probe['correct']}/9 cells)" if "correct" in probe else ""
            out.append(f"probe {probe['name']}: {verdict}{detail}")
    return "\n".join(out)
