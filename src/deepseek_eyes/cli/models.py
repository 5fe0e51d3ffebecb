"""``deepseek-eyes models``: the final models, and whether each sees and how that is known.

Each model of the catalog (the settings' models, then the upstream's ``/models``) with its
sight verdict (:class:`~deepseek_eyes.runtime.sight.Sight`): ``settings`` (the settings say;
never probed), ``probe`` or ``refusal`` (learned, with when it was checked and until when it
holds), or a prior not yet confirmed (``listing``, ``table``, ``unknown``). An alias or a
retired name names its successor. ``--probe MODEL`` asks a model the pixel probe now (the
default model when none is named) and keeps the verdict, as a first image turn would.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings

__all__ = ["models_command"]


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


async def _collect(ctx: click.Context, probe: tuple[str, ...], probe_default: bool
                   ) -> dict[str, Any]:
    from deepseek_eyes.errors import DeepSeekEyesError
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.llm.known import known_model, renamed
    from deepseek_eyes.runtime.runtime import Runtime

    settings = loaded_settings(ctx).settings
    home = DataHome.open(settings)
    runtime = Runtime(settings, home)
    try:
        sight = runtime.sight
        probed: list[dict[str, Any]] = []
        wanted = list(probe)
        if probe_default:
            wanted.append(await runtime.catalog.default_model())
        for model in dict.fromkeys(wanted):
            verdict = await sight.probe(model)
            probed.append({"model": model, "ok": verdict is not None,
                           "verdict": verdict.json() if verdict is not None else None})
        listed = await runtime.catalog.models()
        failure = runtime.catalog.last_failure
        rows: list[dict[str, Any]] = []
        for info in listed:
            verdict = sight.configured(info.id) or sight.learned(info.id)
            prior = verdict is None
            if verdict is None:
                verdict = await sight.priors(info.id)
            row: dict[str, Any] = {"id": info.id, "source": info.source, **verdict.json(),
                                   "prior": prior}
            row.pop("model", None)
            name = renamed(info.id)
            if name is not None:
                row["renamed"] = {"kind": name.kind, "successor": name.successor,
                                  "since": name.since}
            known = known_model(info.id)
            if known is not None:
                row["thinks_by_default"] = known.thinks_by_default
                row["context_tokens"] = known.context_tokens
                row["checked"] = known.checked
            rows.append(row)
        out: dict[str, Any] = {"upstream": sight.upstream, "models": rows, "probes": probed}
        if failure is not None:
            out["listing_error"] = failure.to_dict() if isinstance(
                failure, DeepSeekEyesError) else str(failure)
        return out
    finally:
        await runtime.aclose()
        home.close()


def _render(report: dict[str, Any]) -> str:
    lines = [f"upstream  {report['upstream']}"]
    error = report.get("listing_error")
    if error:
        lines.append(f"  (listing the upstream's models failed: {error.get('code')}; "
                     "showing what is known without it)")
    width = max([len(r["id"]) for r in report["models"]] + [5])
    lines.append(f"{'model'.ljust(width)}  sees  how                       detail")
    for row in report["models"]:
        how = row["how"] + (" (prior, not probed)" if row["prior"] else "")
        detail: list[str] = []
        if row.get("code"):
            detail.append(row["code"])
        if row.get("checked_at"):
            detail.append(f"checked {_when(row['checked_at'])}, until "
                          f"{_when(row.get('expires_at'))}")
        if row.get("renamed"):
            renamed = row["renamed"]
            word = "alias of" if renamed["kind"] == "alias" else "retired; successor"
            detail.append(f"{word} {renamed['successor']}")
        sees = "yes" if row["sees"] else "no"
        lines.append(f"{row['id'].ljust(width)}  {sees.ljust(4)}  {how.ljust(24)}  "
                     f"{'; '.join(detail)}".rstrip())
    for probe in report["probes"]:
        verdict = probe["verdict"]
        if verdict is None:
            lines.append(f"probe {probe['model']}: no answer (the priors decide for now)")
        else:
            said = "sees" if verdict["sees"] else f"does not see ({verdict.get('code')})"
            lines.append(f"probe {probe['model']}: {said}")
    return "\n".join(lines)


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--probe", "probe", multiple=True, metavar="MODEL",
              help="Ask MODEL the pixel probe now and keep the verdict (repeatable).")
@click.option("--probe-default", is_flag=True,
              help="Probe the default final model now.")
@click.pass_context
def models_command(ctx: click.Context, as_json: bool, probe: tuple[str, ...],
                   probe_default: bool) -> None:
    """List the final models: whether each sees, and how that is known."""
    report = asyncio.run(_collect(ctx, probe, probe_default))
    if as_json:
        click.echo(dump_json(report))
    else:
        click.echo(_render(report))
    if any(not p["ok"] for p in report["probes"]):
        sys.exit(1)
