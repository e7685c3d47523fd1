"""Chapter 9's roofline table: where each pair sits, from its Workload and a machine's measured peaks.

For every ch09 pair: FLOPs and bytes of one call (the baseline file's WORKLOAD, shared by its
variants), arithmetic intensity, the ridge point of its precision, the roof that binds it, the
roof's TFLOP/s at that intensity and the shortest time a call can take there. With ``--run`` (the
folder of an ``aisp bench run -t ch09``) it adds the measured baseline and best variant: TFLOP/s and
% of that roof, from ``aisp.report.roofline.annotate``, the code behind ``aisp report roofline``.
Peaks: ``peaks/peak_<key>.json`` from ``aisp peak`` (default: this GPU's key, else h200). No GPU needed.
Run: python ch09/roofline_table.py [--peaks h200] [--run artifacts/<timestamp>]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from aisp.harness.artifacts import best_variant, read_json
from aisp.harness.benchmark import Workload
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import load_benchmark
from aisp.peak.measure import load_peaks
from aisp.report.roofline import annotate, bound_tflops, peak_bandwidth, peak_compute

HERE = Path(__file__).resolve().parent
COLUMNS = ("pair", "precision", "GFLOP", "GB", "FLOP/B", "ridge", "bound", "roof TFLOP/s", "floor ms")
MEASURED = ("baseline TFLOP/s", "best", "best TFLOP/s", "% of roof")


def chapter_workloads(folder: Path = HERE) -> list[tuple[str, Workload]]:
    """(pair name, workload) for every pair the harness discovers in ``folder``."""
    return [(pair.name, load_benchmark(pair.baseline).workload) for pair in pairs_in(folder)]


def roof_row(name: str, workload: Workload, peaks: dict[str, Any]) -> dict[str, Any]:
    """The roofline position of one workload: intensity, ridge, binding roof, attainable rate."""
    precision, peak_tflops = peak_compute(peaks, workload.precision)
    peak_gbps = peak_bandwidth(peaks, workload.link)
    intensity = workload.flops / workload.bytes
    ridge = peak_tflops * 1e3 / peak_gbps
    roof = bound_tflops(intensity, peak_tflops, peak_gbps)
    return {"pair": name, "precision": precision, "GFLOP": workload.flops / 1e9, "GB": workload.bytes / 1e9,
            "FLOP/B": intensity, "ridge": ridge, "bound": "memory" if intensity < ridge else "compute",
            "roof TFLOP/s": roof, "floor ms": workload.flops / (roof * 1e12) * 1e3}


def measured(summary: dict[str, Any], peaks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per pair of a run summary: baseline and best-variant TFLOP/s and the best one's % of its roof."""
    found = {}
    for result in summary.get("results", []):
        best = best_variant(result)
        if not result.get("baseline") or not best:
            continue
        base = annotate(result["baseline"], result.get("workload", {}), peaks)
        top = annotate(best, result.get("workload", {}), peaks)
        if base and top:
            found[result["target"].split(":", 1)[-1]] = {
                "baseline TFLOP/s": base["achieved_tflops"], "best": best["name"],
                "best TFLOP/s": top["achieved_tflops"], "% of roof": top["pct_of_bound"]}
    return found


def cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "-" if value is None else str(value)


def table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """A Markdown table of ``rows`` (missing cells: "-")."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def default_key() -> str:
    if torch.cuda.is_available():
        from aisp.harness.environment import hardware_key
        return hardware_key()
    return "h200"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peaks", default=None, help="hardware key of peaks/peak_<key>.json (default: this GPU, else h200)")
    parser.add_argument("--run", type=Path, default=None, help="a run folder (artifacts/<timestamp>) to add measured rates")
    args = parser.parse_args(argv)
    key = args.peaks or default_key()
    peaks = load_peaks(key)
    if peaks is None:
        print(f"No measured peaks for '{key}': run 'aisp peak' on that machine, or pass --peaks h200.")
        return 2
    rows = [roof_row(name, w, peaks) for name, w in chapter_workloads()]
    columns = list(COLUMNS)
    if args.run:
        found = measured(read_json(args.run / "summary.json"), peaks)
        rows = [{**row, **found.get(row["pair"], {})} for row in rows]
        columns += MEASURED
    print(f"Roofline of chapter 9 on {key} (peaks: {peaks['source']})\n")
    print(table(rows, columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
