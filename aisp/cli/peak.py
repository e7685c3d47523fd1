"""``aisp peak``: show this machine's measured ceilings, measuring (and caching) them when needed."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table


def peak(
    quick: Annotated[bool, typer.Option(
        "--quick", help="Smaller sizes, fewer repeats, no compile probe; not cached.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the peaks document as JSON, not a table.")] = False,
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="Re-measure even when peaks are cached for this machine.")] = False,
) -> None:
    """Measure this machine's ceilings (matmul per dtype, bandwidths, compile time; latency floors of a
    kernel launch, a graph launch and node, a sync, small copies and a torch op's dispatch; with 2+
    GPUs, peer copies per direction, NCCL all-reduce bus bandwidth and small all-reduce latency)."""
    from aisp.harness.environment import hardware_key
    from aisp.peak.measure import FULL, QUICK, environment_changes, load_peaks, measure_peaks, save_peaks

    console = Console(stderr=as_json)
    key = hardware_key()
    cached = None if (quick or refresh) else load_peaks(key)
    if cached is not None:
        console.print(f"Cached peaks for [bold]{key}[/] from {cached['source']} (--refresh re-measures).")
        for change in environment_changes(cached):
            console.print(f"[yellow]Measured under a different environment: {change}[/]")
        peaks = cached
    else:
        with console.status("measuring") as status:
            peaks = measure_peaks(QUICK if quick else FULL, progress=lambda n: status.update(f"measuring {n}"))
        if quick:
            console.print("--quick: figures are indicative and not cached.")
        else:
            console.print(f"Wrote {save_peaks(peaks)}")
    if as_json:
        typer.echo(json.dumps(peaks, indent=2))
    else:
        console.print(peak_table(peaks))


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def peak_table(peaks: dict[str, Any]) -> Table:
    """Measured figures, then skipped and failed probes with their reasons."""
    prov = peaks["provenance"]
    table = Table(title=f"Peaks of {prov['hardware_key']} ({prov.get('gpu_name') or prov.get('cpu_model')}, "
                        f"torch {prov.get('torch')}, {prov.get('date')})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("unit")
    table.add_column("how")
    for name, m in [*peaks["measurements"].items(), *peaks.get("latency", {}).items()]:
        table.add_row(name, _fmt(m["value"]), m["unit"], m["detail"])
    for name, reason in peaks.get("skipped", {}).items():
        table.add_row(name, "skipped", "", reason, style="dim")
    for name, error in peaks.get("errors", {}).items():
        table.add_row(name, "error", "", error, style="red")
    return table
