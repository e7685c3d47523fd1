"""``aisp peak``: show this machine's measured ceilings, measuring (and caching) them when needed."""

from __future__ import annotations

import json
from pathlib import Path
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
    only: Annotated[str | None, typer.Option(
        "--only", help="Measure only these probes (comma-separated, e.g. host_memory,page_cache,first_touch) "
                       "and merge their figures into this machine's cached peaks.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="PATH", help="Write this measurement alone (--only's probes where given) to PATH as JSON; "
                                      "the cached peaks are neither read nor written.")] = None,
) -> None:
    """Measure this machine's ceilings (matmul per dtype, SIMT FFMA and HFMA2 rates, HBM, L2 and
    host<->device bandwidths, compile time; latency floors of a kernel launch, a graph launch and node,
    a graph node on its predecessor's output, a device-side tail launch and graph launch, a WHILE node's pass, a sync, small copies and a torch
    op's dispatch; with 2+ GPUs, peer copies per direction, NCCL all-reduce bus bandwidth and small
    all-reduce and all-to-all latency; the host's memory copy and fill, page-cache read and first-touch
    page-fault rates). ``--out``: what ``bench run --host-peaks`` runs in a subprocess to measure the
    launch and sync floors on the GPU without a CUDA context in the suite's own process. Exit 2: an
    unknown probe in --only, or --only without cached peaks to merge into (and no --out)."""
    from aisp.harness.artifacts import atomic_write_json
    from aisp.harness.environment import hardware_key
    from aisp.peak import measure

    console = Console(stderr=as_json)
    key = hardware_key()
    names = _only(only, measure.probe_names())
    merge = bool(names) and not quick and out is None
    base = measure.load_peaks(key) if merge else None
    if merge and base is None:
        _fail(f"error: no cached peaks for {key} to merge --only into; run 'aisp peak' first")
    cached = None if (quick or refresh or names or out) else measure.load_peaks(key)
    if cached is not None:
        console.print(f"Cached peaks for [bold]{key}[/] from {cached['source']} (--refresh re-measures).")
        for change in measure.environment_changes(cached):
            console.print(f"[yellow]Measured under a different environment: {change}[/]")
        peaks = cached
    else:
        with console.status("measuring") as status:
            cfg = measure.QUICK if quick else measure.FULL
            peaks = measure.measure_peaks(cfg, progress=lambda n: status.update(f"measuring {n}"), only=names or None)
        if base is not None:
            peaks = measure.merge_peaks(base, peaks, names)
        if out is not None:
            atomic_write_json(out, peaks)
            console.print(f"Wrote {out} (not cached)")
        elif quick:
            console.print("--quick: figures are indicative and not cached.")
        else:
            console.print(f"Wrote {measure.save_peaks(peaks)}")
    if as_json:
        typer.echo(json.dumps(peaks, indent=2))
    else:
        console.print(peak_table(peaks))


def _only(text: str | None, known: list[str]) -> list[str]:
    """The probe names of ``--only``; an unknown one exits 2 naming it."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if unknown := [n for n in names if n not in known]:
        _fail(f"error: unknown probe(s) {', '.join(unknown)} in --only; the probes are {', '.join(known)}")
    return names


def _fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(2)


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
