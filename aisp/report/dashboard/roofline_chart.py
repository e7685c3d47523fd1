"""A chapter's roofline as a Plotly figure: each pair's baseline -> best optimized move under the
roofs of the precisions it is judged against, names in the hover text (none printed on the plot).

The points come from the roofline annotations a run stored in its results (``variant["roofline"]``);
a result without them is annotated from this hardware key's cached peaks where there are some.
"""

from __future__ import annotations

from typing import Any

from aisp.harness.artifacts import best_variant
from aisp.peak.measure import load_peaks
from aisp.report.dashboard.collect import PairRun
from aisp.report.roofline import HOST_LINKS, UnknownName, annotate

ROOF_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#17becf", "#bcbd22")


def _roof(variant: dict[str, Any], workload: dict[str, Any], peaks: dict[str, Any] | None) -> dict[str, Any] | None:
    if variant.get("roofline"):
        return variant["roofline"]
    try:
        return annotate(variant, workload, peaks) if peaks else None
    except KeyError:
        return None


def points(entries: list[PairRun]) -> tuple[list[dict[str, Any]], list[str]]:
    """(one point per pair with both variants' rate at its intensity, targets left out with why)."""
    peak_cache: dict[str, dict[str, Any] | None] = {}
    found, left_out = [], []
    for entry in entries:
        result = entry.result
        best = best_variant(result)
        if not result.get("baseline") or not best:
            left_out.append(f"{result['target']}: no timed baseline and optimized variant")
            continue
        workload = result.get("workload") or {}
        if workload.get("link") in HOST_LINKS:
            left_out.append(f"{result['target']}: its bytes cross the host's {workload['link']}, not a GPU's roofline")
            continue
        if entry.key not in peak_cache:
            peak_cache[entry.key] = load_peaks(entry.key)
        try:
            base, opt = (_roof(v, workload, peak_cache[entry.key]) for v in (result["baseline"], best))
        except UnknownName as exc:
            left_out.append(f"{result['target']}: {exc}")
            continue
        if not base or not opt or not base.get("intensity") or not base.get("achieved_tflops"):
            left_out.append(f"{result['target']}: its workload declares no FLOPs and bytes (or no peaks for "
                            f"{entry.key})")
            continue
        found.append({"entry": entry, "best": best["name"], "base": base, "opt": opt})
    return found, left_out


def _roof_traces(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roofs = sorted({(p["base"]["peak_precision"], p["base"].get("gpus", 1), p["base"]["peak_tflops"],
                     p["base"]["peak_gbps"]) for p in pts}, key=lambda r: r[2])
    xs = [p["base"]["intensity"] for p in pts] + [t * 1e3 / g for _, _, t, g in roofs]
    lo, hi = min(xs) / 8, max(xs) * 8
    traces = []
    for i, (precision, gpus, tflops, gbps) in enumerate(roofs):
        ridge = tflops * 1e3 / gbps
        on = f" on {gpus} GPUs" if gpus > 1 else ""
        traces.append({"type": "scatter", "mode": "lines", "name": f"roof {precision}{on}: {tflops:,.3g} TFLOP/s, "
                       f"{gbps:,.0f} GB/s", "x": [lo, ridge, hi], "y": [lo * gbps / 1e3, tflops, tflops],
                       "line": {"color": ROOF_COLORS[i % len(ROOF_COLORS)], "width": 2},
                       "hovertemplate": f"{precision} roof<br>%{{x:.3g}} FLOP/byte: %{{y:.3g}} TFLOP/s<extra></extra>"})
    return traces


def roofline_figure(entries: list[PairRun]) -> tuple[dict[str, Any] | None, list[str]]:
    """(the figure or None, the targets left out with why). Log-log axes; baseline hollow, optimized
    filled, joined by a line per pair."""
    pts, left_out = points(entries)
    if not pts:
        return None, left_out
    traces = _roof_traces(pts)
    for p in pts:
        entry, x = p["entry"], p["base"]["intensity"]
        target = entry.result["target"]
        text = [f"<b>{target}</b> ({entry.key})<br>{name}<br>{x:.3g} FLOP/byte, {roof['achieved_tflops']:.3g} TFLOP/s"
                f"<br>{roof['pct_of_bound']:.0f}% of its {roof['bound']} bound<br>run {entry.run.run_id}, "
                f"commit {entry.run.commit}" for name, roof in (("baseline", p["base"]), (p["best"], p["opt"]))]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": target, "legendgroup": target,
                       "x": [x, x], "y": [p["base"]["achieved_tflops"], p["opt"]["achieved_tflops"]],
                       "marker": {"symbol": ["circle-open", "circle"], "size": 10}, "text": text,
                       "hovertemplate": "%{text}<extra></extra>"})
    layout = {"margin": {"l": 60, "r": 20, "t": 30, "b": 50}, "height": 480, "hovermode": "closest",
              "xaxis": {"type": "log", "dtick": 1, "title": {"text": "arithmetic intensity (FLOP/byte)"}},
              "yaxis": {"type": "log", "dtick": 1, "title": {"text": "TFLOP/s"}},
              "legend": {"font": {"size": 10}}}
    return {"data": traces, "layout": layout}, left_out
