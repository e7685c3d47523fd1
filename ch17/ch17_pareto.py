"""A latency/accuracy frontier for latency_accuracy_sweep.py: measured points, the Pareto marking, a
rich table and an optional plot (matplotlib, imported where used)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.table import Table


@dataclass(frozen=True)
class Point:
    name: str
    latency_ms: float
    agreement: float
    escalated: float = 0.0
    """Share of requests the full model ran again (cascades)."""
    pareto: bool = False


def pareto(points: Sequence[Point]) -> list[Point]:
    """``points`` with ``pareto`` set where no other point is at most as slow and at least as
    accurate, and strictly better in one of the two."""
    def dominated(p: Point) -> bool:
        return any(q.latency_ms <= p.latency_ms and q.agreement >= p.agreement
                   and (q.latency_ms < p.latency_ms or q.agreement > p.agreement) for q in points)
    return [replace(p, pareto=not dominated(p)) for p in points]


def table(points: Sequence[Point], title: str) -> Table:
    out = Table("config", "latency ms", "agreement", "escalated", "Pareto", title=title)
    for p in sorted(points, key=lambda p: p.latency_ms):
        out.add_row(p.name, f"{p.latency_ms:.3f}", f"{p.agreement:.1%}", f"{p.escalated:.0%}", "*" if p.pareto else "")
    return out


def plot(points: Sequence[Point], path: Path) -> None:
    """Agreement against latency, the frontier joined (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in points:
        ax.scatter(p.latency_ms, p.agreement, c="C1" if p.name.startswith("cascade") else "C0")
        ax.annotate(p.name, (p.latency_ms, p.agreement), fontsize=7)
    front = sorted((p for p in points if p.pareto), key=lambda p: p.latency_ms)
    ax.plot([p.latency_ms for p in front], [p.agreement for p in front], "k--", lw=0.8)
    ax.set(xlabel="latency (ms)", ylabel="agreement with the full model", title="early exit and cascades")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
