"""``aisp profile diff``: Nsight Compute on every variant of a pair, top kernels side by side.

Each variant runs standalone under ncu (:func:`aisp.profile.pair.profile_target` with the ncu tool:
the torch trace ranks its kernels, ncu profiles those). The table has one column per kernel, its
variant's top kernels in rank order, variants left to right, and one row per figure that says what
limits a kernel: duration, speed-of-light % of compute (SM) and of memory, DRAM and L2 throughput,
tensor pipe utilisation, achieved occupancy and the top warp stall reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from aisp.profile.pair import ProfileRequest, profile_target


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _gbps(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _stalls(value: list[list[Any]]) -> str:
    return "\n".join(f"{reason} {ratio:.2f}" for reason, ratio in value) or "n/a"


ROWS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("duration (µs)", "duration_us", lambda v: f"{v:,.1f}"),
    ("SOL compute: SM %", "sm_pct", _pct),
    ("SOL memory %", "memory_pct", _pct),
    ("DRAM %", "dram_pct", _pct),
    ("DRAM GB/s", "dram_gbps", _gbps),
    ("L2 %", "l2_pct", _pct),
    ("L2 GB/s", "l2_gbps", _gbps),
    ("tensor pipe %", "tensor_pct", _pct),
    ("achieved occupancy %", "occupancy", _pct),
    ("top stalls (warps per issue)", "top_stalls", _stalls),
)
"""(label, key in :func:`aisp.profile.ncu.parse_raw_csv`'s metrics, formatter) per row of the table."""


@dataclass(frozen=True)
class KernelColumn:
    """One profiled kernel of one variant."""

    variant: str
    launch: str
    """``function <<<grid, block>>>``."""
    metrics: dict[str, Any]


def columns(variants: dict[str, dict[str, Any]], top: int) -> list[KernelColumn]:
    """The first ``top`` kernels of each profiled variant (their ncu order: the trace's rank)."""
    return [KernelColumn(name, launch, metrics) for name, data in variants.items()
            for launch, metrics in list(data.get("kernels", {}).items())[:top]]


def rows(cols: list[KernelColumn]) -> list[list[str]]:
    """One row per figure of :data:`ROWS`: its label, then its value in each column."""
    return [[label, *(fmt(c.metrics.get(key)) for c in cols)] for label, key, fmt in ROWS]


def totals(variants: dict[str, dict[str, Any]], top: int) -> dict[str, float]:
    """Each variant's summed duration (µs) of the kernels the table shows."""
    return {name: sum(m["duration_us"] for m in list(data.get("kernels", {}).values())[:top])
            for name, data in variants.items()}


def diff_table(variants: dict[str, dict[str, Any]], top: int, title: str) -> Table:
    """The side-by-side table of the profiled variants' top kernels."""
    cols = columns(variants, top)
    table = Table("", *(f"{c.variant}\n{c.launch}" for c in cols), title=title)
    for row in rows(cols):
        table.add_row(*row)
    sums = totals(variants, top)
    table.add_row("variant's shown kernels (µs)", *(f"{sums[c.variant]:,.1f}" for c in cols), style="bold")
    return table


COLUMN_WIDTH = 24
"""Characters one kernel's column needs for the table to stay readable (its launch, its stalls)."""


def fits(variants: dict[str, dict[str, Any]], top: int, width: int) -> bool:
    """Whether the side-by-side table of ``top`` kernels a variant stays readable ``width`` characters wide."""
    return 30 + COLUMN_WIDTH * len(columns(variants, top)) <= width


def diff_lines(variants: dict[str, dict[str, Any]], top: int) -> list[str]:
    """The table's figures as text, one block per kernel (its variant and launch, then one figure a
    line), for a console too narrow for the table: a CI log, a pipe, a small terminal."""
    lines: list[str] = []
    sums = totals(variants, top)
    for name, data in variants.items():
        lines.append(f"{name}: {len(data.get('kernels', {}))} kernels profiled, the top {top} "
                     f"{sums[name]:,.1f} µs")
        for col in columns({name: data}, top):
            lines.append(f"  {col.launch}")
            lines += [f"    {label}: {fmt(col.metrics.get(key))}".replace("\n", ", ")
                      for label, key, fmt in ROWS]
    return lines


def diff_pair(target: str, output_dir: Path | None, kernels: int, timeout_s: float) -> dict[str, Any]:
    """Profile every variant of ``target`` under ncu; ``profile_ncu.json`` holds what it returns."""
    return profile_target(ProfileRequest(target, "ncu", output_dir, kernels=kernels, timeout_s=timeout_s))


def profiled(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The variants ncu profiled (neither skipped nor failed)."""
    return {name: data for name, data in result["variants"].items() if "kernels" in data}
