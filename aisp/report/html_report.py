"""A self-contained HTML report of one run: summary table, roofline and speedup chart (images inline)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text, best_variant, read_json
from aisp.peak.measure import load_peaks
from aisp.report.plotting import new_figure, png_base64
from aisp.report.roofline import annotate, figure, pair_points
from aisp.report.tables import note_lines, summary_rows

VERDICT_COLORS = {"ok": "tab:green", "inconclusive": "tab:cyan", "ok-unchecked": "tab:purple",
                  "slower": "tab:orange", "regressed": "tab:red"}
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f3f3f3}"
         ".note{color:#666}")


def load_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary.json, manifest.json or {}) of a run folder."""
    manifest = run_dir / "manifest.json"
    return read_json(run_dir / "summary.json"), (read_json(manifest) if manifest.exists() else {})


def _roofline_cell(result: dict[str, Any], peaks: dict[str, Any] | None) -> str:
    best = best_variant(result)
    if not best:
        return "-"
    roof = best.get("roofline") or (annotate(best, result.get("workload", {}), peaks) if peaks else None)
    return f"{roof['pct_of_bound']:.0f}% ({roof['bound']})" if roof else "-"


def _table(results: list[dict[str, Any]], peaks: dict[str, Any] | None) -> str:
    rows = summary_rows(results)
    for row, result in zip(rows, results, strict=True):
        row["best % of roofline"] = _roofline_cell(result, peaks)
    if not rows:
        return "<p>No pairs in this run.</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _notes(results: list[dict[str, Any]]) -> str:
    lines = note_lines(results)
    if not lines:
        return "<p class='note'>No notes.</p>"
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def speedup_chart(results: list[dict[str, Any]]) -> str | None:
    """Base64 PNG of each pair's speedup with its 95% interval, or None when no pair has one."""
    timed = [r for r in results if r.get("speedup")]
    if not timed:
        return None
    fig, ax = new_figure(width=8, height=1.2 + 0.35 * len(timed))
    values = [r["speedup"]["value"] for r in timed]
    errors = [[r["speedup"]["value"] - r["speedup"]["low"] for r in timed],
              [r["speedup"]["high"] - r["speedup"]["value"] for r in timed]]
    ax.barh([r["target"] for r in timed], values, xerr=errors, capsize=3,
            color=[VERDICT_COLORS.get(r["verdict"], "tab:gray") for r in timed])
    ax.axvline(1.0, color="black", lw=1)
    ax.invert_yaxis()
    ax.set_xlabel("speedup, baseline / best optimized (95% interval)")
    return png_base64(fig)


def roofline_png(results: list[dict[str, Any]], peaks: dict[str, Any] | None) -> tuple[str | None, str]:
    """(base64 PNG or None, a note on what is plotted or why nothing is)."""
    if peaks is None:
        return None, "No measured peaks for this hardware key; run 'aisp peak' to get a roofline."
    points = pair_points(results, peaks)
    if not points:
        return None, "No pair declares both FLOPs and bytes with both variants timed."
    return png_base64(figure(points, peaks)), f"{len(points)} of {len(results)} pairs plotted; peaks from {peaks['source']}."


def _img(encoded: str | None, alt: str) -> str:
    return f'<img alt="{alt}" src="data:image/png;base64,{encoded}">' if encoded else ""


def build_html(run_dir: Path) -> str:
    """The whole report as one HTML document."""
    summary, env = load_run(run_dir)
    results = summary.get("results", [])
    peaks = load_peaks(summary["hardware_key"])
    roof, roof_note = roofline_png(results, peaks)
    speed = speedup_chart(results)
    facts = {"hardware": summary["hardware_key"], "GPU": env.get("gpu_name"), "driver": env.get("driver"),
             "torch": env.get("torch"), "CUDA": env.get("cuda"), "commit": env.get("git_commit")}
    facts_html = ", ".join(f"{k}: {html.escape(str(v))}" for k, v in facts.items() if v)
    title = html.escape(f"aisp run {summary.get('run_id', run_dir.name)}")
    return "\n".join([
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head><body>",
        f"<h1>{title}</h1><p>{facts_html}</p>",
        "<h2>Pairs</h2>", _table(results, peaks),
        "<h2>Notes</h2>", _notes(results),
        "<h2>Speedup</h2>", _img(speed, "speedup chart") or "<p class='note'>No pair has a speedup.</p>",
        "<h2>Roofline</h2>", _img(roof, "roofline"), f"<p class='note'>{html.escape(roof_note)}</p>",
        "</body></html>",
    ])


def write_html(run_dir: Path, output: Path | None = None) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) atomically and return its path."""
    path = output or run_dir / "report.html"
    atomic_write_text(path, build_html(run_dir))
    return path
