"""The cumulative path of each case study: one row per stage, from a run's artifacts.

Reads a run folder of ``aisp bench run -t ch20`` (``summary.json`` and ``manifest.json``; default:
the newest run under ``artifacts/`` that holds ch20 results) and, for every pair whose optimized
files are stages (``optimized_<name>_s<k>_<step>.py``), prints a Markdown table: stage, median ms,
speedup over the baseline with its 95% interval (cumulative: each stage keeps the earlier ones),
speedup over the previous stage (ratio of medians), items/s, GB/s, TFLOP/s and the stage's
metrics (e.g. ``mfu``). ``--png FILE`` also draws the cumulative speedup per stage, one panel per
case study, log scale (needs matplotlib: ``pip install -e ".[plot]"``). The stored expectations
keep only each pair's best variant, so the per-stage figures come from a run's artifacts.
Run: python ch20/stages_chart.py [--run artifacts/<timestamp>] [--chapter ch20] [--png stages.png]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import read_json
from aisp.report.tables import markdown_table

STAGE = re.compile(r"_s(\d+)_(\w+)$")


def newest_run(artifacts: Path, chapter: str) -> Path:
    """The newest run folder under ``artifacts`` whose summary holds a result of ``chapter``."""
    for summary in sorted(artifacts.glob("*/summary.json"), reverse=True):
        if any(r.get("group") == chapter for r in read_json(summary).get("results", [])):
            return summary.parent
    raise FileNotFoundError(f"no run of {chapter} under {artifacts}/ (run: aisp bench run -t {chapter})")


def stages(result: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(stage number, step name, variant record), the baseline as stage 0, in stage order."""
    found = [(0, "baseline", result["baseline"])] if result.get("baseline") else []
    for var in result.get("variants", []):
        match = STAGE.search(var["name"])
        if match:
            found.append((int(match.group(1)), match.group(2), var))
    return sorted(found, key=lambda s: s[0])


def _median(var: dict[str, Any]) -> float | None:
    return (var.get("summary") or {}).get("median")


def stage_rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """One row per stage of a pair result (figures '-' where a stage has none: skipped, failed)."""
    rows, previous = [], None
    for number, step, var in stages(result):
        ms, ratio, rate = _median(var), var.get("speedup"), var.get("throughput") or {}
        metrics = ", ".join(f"{k} {v:.3g}" for k, v in sorted((var.get("metrics") or {}).items())
                            if isinstance(v, (int, float)))
        rows.append({
            "stage": f"s{number} {step}" if number else "baseline",
            "median_ms": f"{ms:.4g}" if ms else "-",
            "vs_baseline": f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]" if ratio else
            ("1.00x" if number == 0 and ms else "-"),
            "vs_previous": f"{previous / ms:.2f}x" if ms and previous else "-",
            "items_per_s": f"{rate['items_per_s']:.4g}" if "items_per_s" in rate else "-",
            "gbps": f"{rate['gbps']:.4g}" if "gbps" in rate else "-",
            "tflops": f"{rate['tflops']:.4g}" if "tflops" in rate else "-",
            "metrics": metrics or "-",
            "verdict": var.get("verdict", "-"),
        })
        previous = ms or previous
    return rows


def staged_results(run: Path, chapter: str) -> list[dict[str, Any]]:
    return [r for r in read_json(run / "summary.json").get("results", [])
            if r.get("group") == chapter and len(stages(r)) > 1]


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4), squeeze=False)
    for ax, result in zip(axes[0], results, strict=True):
        points = [(f"s{n}\n{step}" if n else "baseline", 1.0 if n == 0 else (v.get("speedup") or {}).get("value"))
                  for n, step, v in stages(result)]
        labels, values = zip(*[(label, value) for label, value in points if value], strict=True)
        bars = ax.bar(labels, values, color="tab:green")
        ax.bar_label(bars, labels=[f"{v:.2f}x" for v in values], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(result["name"], fontsize=10)
        ax.set_ylabel("cumulative speedup over the baseline")
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="a run folder (default: the newest under --artifacts-dir with the chapter)")
    p.add_argument("--artifacts-dir", type=Path, default=Path("artifacts"), help="folder of run folders searched for the newest run")
    p.add_argument("--chapter", default="ch20", help="the chapter whose staged pairs are charted")
    p.add_argument("--png", type=Path, help="also draw the cumulative speedup per stage here")
    args = p.parse_args(argv)
    try:
        run = args.run or newest_run(args.artifacts_dir, args.chapter)
        results = staged_results(run, args.chapter)
        manifest = read_json(run / "manifest.json") if (run / "manifest.json").exists() else {}
    except (FileNotFoundError, ValueError) as exc:
        print(f"stages_chart: {exc}", file=sys.stderr)
        return 2
    if not results:
        print(f"stages_chart: no staged pair of {args.chapter} in {run}", file=sys.stderr)
        return 2
    gpu = manifest.get("gpu_name") or "CPU"
    title = f"{args.chapter} case studies, {gpu}, run {run.name}"
    print(f"# {title}\n")
    for result in results:
        print(f"## {result['name']}\n\n{markdown_table(stage_rows(result))}")
    if args.png:
        try:
            plot(results, args.png, title)
        except ImportError:
            print("stages_chart: --png needs matplotlib (pip install -e \".[plot]\")", file=sys.stderr)
            return 2
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
