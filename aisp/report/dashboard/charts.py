"""The dashboard's charts as Plotly figure specifications (plain dicts that plotly.js draws).

Only the bundled plotly.js is needed to draw them, so building a figure needs no plotting library.
Labels go in the hover text, never printed over the plot: a crowded roofline or a long pair list
stays readable, and every point says its commit, date, GPU and interval when pointed at.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from aisp.report.dashboard.collect import PairRun

VERDICT_COLORS = {"ok": "#2ca02c", "ok-unchecked": "#98df8a", "inconclusive": "#17becf", "slower": "#ff7f0e",
                  "regressed": "#d62728", "verify-failed": "#9467bd", "error": "#8c564b", "timeout": "#e377c2",
                  "skipped": "#bbbbbb"}
NEUTRAL = "#7f7f7f"
"""The colour of a verdict this table does not know (verdicts are data: a new one still draws)."""
KEY_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
BASE_LAYOUT = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "hovermode": "closest",
               "legend": {"orientation": "h", "y": -0.2}, "font": {"size": 12}}


def verdict_color(verdict: str) -> str:
    return VERDICT_COLORS.get(verdict, NEUTRAL)


def plottable(ratio: dict[str, Any] | None) -> bool:
    """Whether a ratio can go on a log axis: value and interval finite positive numbers (a result
    file may hold "inf" or null there)."""
    values = [(ratio or {}).get(k) for k in ("value", "low", "high")]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf") for v in values)


def _interval(ratio: dict[str, Any] | None) -> str:
    return f"{ratio['value']:.3g}x [{ratio['low']:.3g}, {ratio['high']:.3g}]" if ratio else "no speedup"


def _hover(entry: PairRun) -> str:
    run, result = entry.run, entry.result
    return "<br>".join([f"<b>{result['target']}</b> ({entry.key})", f"speedup {_interval(result.get('speedup'))}",
                        f"verdict {result.get('verdict')}", f"best {result.get('best') or '-'}",
                        f"run {run.run_id}, {run.date}", f"commit {run.commit}", f"GPU {run.gpu}"])


def _error_bars(ratios: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "data", "symmetric": False, "array": [r["high"] - r["value"] for r in ratios],
            "arrayminus": [r["value"] - r["low"] for r in ratios], "thickness": 1.2}


LOG_TICKS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def log_axis(values: list[float], title: str) -> dict[str, Any]:
    """A log axis labelled 0.5x, 1x, 2x, 5x, 10x... (plotly's own log ticks print bare digits)."""
    lo, hi = min(values, default=1.0), max(values, default=1.0)
    ticks = [t for t in LOG_TICKS if lo <= t <= hi]
    if len(ticks) < 2:  # a narrow range: plotly's own ticks, suffixed
        return {"type": "log", "title": {"text": title}, "ticksuffix": "x", "tickformat": ".3~g"}
    ticks = [t for t in LOG_TICKS if lo / 2 <= t <= hi * 2]
    return {"type": "log", "title": {"text": title}, "tickvals": ticks, "ticktext": [f"{t:g}x" for t in ticks]}


def speedup_figure(entries: list[PairRun]) -> dict[str, Any] | None:
    """Each pair's headline speedup with its 95% interval on a log axis, one colour (and legend entry)
    per verdict; None when no entry has a speedup."""
    timed = [e for e in entries if plottable(e.result.get("speedup"))]
    if not timed:
        return None
    keys = {e.key for e in timed}
    label = (lambda e: f"{e.result['target']} ({e.key})") if len(keys) > 1 else (lambda e: e.result["target"])
    order = [label(e) for e in timed]
    traces = []
    for verdict in sorted({str(e.result.get("verdict")) for e in timed}):
        group = [e for e in timed if str(e.result.get("verdict")) == verdict]
        ratios = [e.result["speedup"] for e in group]
        traces.append({"type": "scatter", "mode": "markers", "name": verdict, "x": [r["value"] for r in ratios],
                       "y": [label(e) for e in group], "error_x": _error_bars(ratios),
                       "marker": {"color": verdict_color(verdict), "size": 9},
                       "text": [_hover(e) for e in group], "hovertemplate": "%{text}<extra></extra>"})
    layout = {**BASE_LAYOUT, "height": 160 + 24 * len(order), "showlegend": True,
              "legend": {"title": {"text": "verdict"}, "orientation": "h", "y": 1.02, "yanchor": "bottom"},
              "xaxis": log_axis([v for e in timed for v in (e.result["speedup"]["low"], e.result["speedup"]["high"])],
                                "speedup, baseline / best optimized (95% interval, log scale)"),
              "yaxis": {"categoryorder": "array", "categoryarray": order[::-1], "automargin": True},
              "shapes": [{"type": "line", "x0": 1, "x1": 1, "yref": "paper", "y0": 0, "y1": 1,
                          "line": {"color": "#333", "width": 1, "dash": "dot"}}]}
    return {"data": traces, "layout": layout}


def _band(entry: dict[str, Any]) -> tuple[float, float] | None:
    """The stored expectation's range: its interval, widened to every speedup of its history."""
    values = [h["speedup"] for h in entry.get("history", []) if plottable({"value": h.get("speedup"), "low": 1, "high": 1})]
    stored = entry.get("speedup") or {}
    values += [stored["low"], stored["high"]] if plottable(stored) else []
    return (min(values), max(values)) if values else None


def _stored_trace(key: str, entry: dict[str, Any], color: str) -> dict[str, Any] | None:
    history = [h for h in entry.get("history", []) if h.get("date") and plottable({"value": h.get("speedup"),
                                                                                   "low": 1, "high": 1})]
    if not history:
        return None
    return {"type": "scatter", "mode": "markers", "name": f"stored expectation runs ({key})",
            "x": [h["date"] for h in history], "y": [h["speedup"] for h in history],
            "marker": {"symbol": "diamond-open", "size": 10, "color": color},
            "text": [f"stored run ({key})<br>{h['date']}<br>commit {(h.get('commit') or 'unknown')[:10]}"
                     f"<br>speedup {h['speedup']:.3g}x<br>best {h.get('best') or '-'}" for h in history],
            "hovertemplate": "%{text}<extra></extra>"}


def trend_figure(history: list[PairRun], stored: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A pair's speedup over its runs, one line per hardware key, with the stored expectation of that
    key as a shaded band and its stored runs as hollow diamonds; None with nothing to draw."""
    traces, shapes = [], []
    keys = sorted({e.key for e in history} | set(stored))
    for i, key in enumerate(keys):
        color = KEY_COLORS[i % len(KEY_COLORS)]
        runs = [e for e in history if e.key == key and plottable(e.result.get("speedup"))]
        if runs:
            ratios = [e.result["speedup"] for e in runs]
            traces.append({"type": "scatter", "mode": "lines+markers", "name": f"runs ({key})",
                           "x": [e.run.date for e in runs], "y": [r["value"] for r in ratios],
                           "error_y": _error_bars(ratios), "line": {"color": color},
                           "marker": {"color": [verdict_color(str(e.result.get("verdict"))) for e in runs],
                                      "size": 10, "line": {"color": color, "width": 2}},
                           "text": [_hover(e) for e in runs], "hovertemplate": "%{text}<extra></extra>"})
        entry = stored.get(key)
        band = _band(entry) if entry else None
        if band:
            shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": band[0], "y1": band[1],
                           "fillcolor": color, "opacity": 0.15, "line": {"width": 0}, "layer": "below"})
            traces.append(_stored_trace(key, entry, color))
    traces = [t for t in traces if t]
    if not traces:
        return None
    layout = {**BASE_LAYOUT, "height": 380, "shapes": shapes, "xaxis": _date_axis(traces),
              "yaxis": log_axis(_extent(traces, shapes), "speedup (log scale); band: stored expectation")}
    return {"data": traces, "layout": layout}


def _extent(traces: list[dict[str, Any]], shapes: list[dict[str, Any]]) -> list[float]:
    """Every y the chart must show: points, the ends of their error bars, the bands."""
    values = [y for s in shapes for y in (s["y0"], s["y1"])]
    for t in traces:
        bars = t.get("error_y") or {}
        values += t["y"]
        values += [y + d for y, d in zip(t["y"], bars.get("array", []), strict=False)]
        values += [y - d for y, d in zip(t["y"], bars.get("arrayminus", []), strict=False)]
    return values


def _parse_date(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _date_axis(traces: list[dict[str, Any]]) -> dict[str, Any]:
    """A date axis; a day either side when every point has the same date (plotly would zoom into
    milliseconds around a single run)."""
    dates = sorted(d for t in traces for d in map(_parse_date, t["x"]) if d)
    axis: dict[str, Any] = {"type": "date", "title": {"text": "run date"}}
    if dates and dates[0] == dates[-1]:
        axis["range"] = [(dates[0] - timedelta(days=1)).isoformat(), (dates[0] + timedelta(days=1)).isoformat()]
    return axis


def samples_figure(entry: PairRun) -> dict[str, Any] | None:
    """Box plots of each variant's raw timed samples in one run (ms); None without samples."""
    result = entry.result
    records = [v for v in [result.get("baseline"), *result.get("variants", [])] if v and v.get("samples_ms")]
    if not records:
        return None
    traces = [{"type": "box", "name": v["name"], "y": v["samples_ms"], "boxpoints": "suspectedoutliers",
               "marker": {"color": NEUTRAL if i == 0 else verdict_color(str(v.get("verdict")))},
               "hovertemplate": f"{v['name']}<br>%{{y:.4g}} ms<extra></extra>"} for i, v in enumerate(records)]
    layout = {**BASE_LAYOUT, "height": 340, "showlegend": False,
              "title": {"text": f"raw samples, run {entry.run.run_id} ({entry.key}, {entry.run.gpu})"},
              "yaxis": {"title": {"text": "ms per call"}, "rangemode": "tozero"}}
    return {"data": traces, "layout": layout}
