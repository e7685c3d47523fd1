"""Occupancy sweep: achieved bandwidth of z = a * x + y per block size, registers (ILP) and shared memory.

For every block size, elements per thread (ILP 1/2/4/8: more loads in flight, more registers) and
dynamic shared memory reserved per block (unused, as a shared-memory-hungry kernel would reserve
it), the kernel of saxpy_ilp.cu runs on a persistent grid of SMs x resident blocks. The table
shows what the occupancy API says fits (registers per thread, blocks per SM, occupancy) next to
the bandwidth measured, as GB/s and as a share of the HBM copy ceiling (``aisp peak``): the
lesson is that occupancy matters only until enough bytes are in flight.
Run: python ch08/occupancy_sweep.py [--out occupancy_sweep.png] [--n 67108864]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from baseline_ilp_vs_occupancy import INFO_ARGS, LIBRARY, RUN_ARGS
from ch08_common import bind, call, ints_out
from rich.console import Console
from rich.table import Table

from aisp.kits import native


@dataclass(frozen=True)
class SweepConfig:
    n: int = 1 << 26
    """Elements of x, y and z (fp32): 768 MiB moved per call by default."""
    blocks: tuple[int, ...] = (64, 128, 256, 512, 1024)
    """Threads per block."""
    ilps: tuple[int, ...] = (1, 2, 4, 8)
    """Elements per thread per loop step."""
    smem_kb: tuple[int, ...] = (0, 48, 96)
    """Dynamic shared memory reserved per block, KiB."""
    repeats: int = 10


@dataclass(frozen=True)
class Record:
    block: int
    ilp: int
    registers: int
    smem_kb: int
    blocks_per_sm: int
    occupancy: float
    """Resident threads per SM / the SM's maximum."""
    gbps: float
    """Achieved bandwidth, bytes read + written per second / 1e9 (0 when no block fits)."""


def rows(records: Sequence[Record], peak_gbps: float | None) -> list[tuple[str, ...]]:
    """Table rows, fastest first: block, ILP, registers, shared KiB, blocks/SM, occupancy, GB/s, % of peak."""
    out = []
    for r in sorted(records, key=lambda r: -r.gbps):
        share = f"{100 * r.gbps / peak_gbps:.0f}%" if peak_gbps and r.gbps else "-"
        speed = f"{r.gbps:,.0f}" if r.gbps else "does not fit"
        out.append((str(r.block), str(r.ilp), str(r.registers), str(r.smem_kb), str(r.blocks_per_sm),
                    f"{100 * r.occupancy:.0f}%", speed, share))
    return out


def table(records: Sequence[Record], peak_gbps: float | None) -> Table:
    t = Table(title="z = a*x + y on a persistent grid (fp32)")
    for name in ("block", "ILP", "regs", "smem KiB", "blocks/SM", "occupancy", "GB/s", "of HBM copy"):
        t.add_column(name, justify="right")
    for row in rows(records, peak_gbps):
        t.add_row(*row)
    return t


def plot(records: Sequence[Record], peak_gbps: float | None, path: Path) -> None:
    """Bandwidth against occupancy, one series per ILP, the HBM copy ceiling as a line."""
    from aisp.report.plotting import new_figure

    fig, ax = new_figure(width=7, height=4.5)
    for ilp in sorted({r.ilp for r in records}):
        pts = sorted((r.occupancy * 100, r.gbps) for r in records if r.ilp == ilp and r.gbps)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", label=f"ILP {ilp}")
    if peak_gbps:
        ax.axhline(peak_gbps, color="gray", linestyle="--", label=f"HBM copy {peak_gbps:,.0f} GB/s")
    ax.set(xlabel="occupancy (%)", ylabel="GB/s (read + write)", title="Bandwidth vs occupancy and ILP")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def measure(cfg: SweepConfig, device: torch.device) -> list[Record]:
    """Every (block, ILP, shared memory) point, timed with CUDA events where a block fits."""
    from aisp.peak.probes import median_ms

    lib = LIBRARY.load(device)
    run_fn, info_fn = bind(lib, "saxpy_run", RUN_ARGS), bind(lib, "saxpy_info", INFO_ARGS)
    x, y = torch.randn(cfg.n, device=device), torch.randn(cfg.n, device=device)
    z = torch.empty_like(x)
    max_threads = torch.cuda.get_device_properties(device).max_threads_per_multi_processor
    records = []
    for block, ilp, kb in itertools.product(cfg.blocks, cfg.ilps, cfg.smem_kb):
        regs, per_sm = ints_out(info_fn, ilp, block, kb << 10, count=2)
        args = (ilp, block, per_sm, kb << 10, x.data_ptr(), y.data_ptr(), z.data_ptr(), 1.5, cfg.n,
                native.stream(device))
        ms = median_ms(lambda a=args: call(run_fn, *a), device, cfg.repeats) if per_sm else 0.0
        gbps = 12.0 * cfg.n / (ms * 1e-3) / 1e9 if ms else 0.0
        records.append(Record(block, ilp, regs, kb, per_sm, per_sm * block / max_threads, gbps))
    torch.testing.assert_close(z, 1.5 * x + y)
    return records


def hbm_peak() -> float | None:
    """The HBM copy ceiling of this GPU from ``aisp peak``'s cached figures, or None."""
    from aisp.harness.environment import hardware_key
    from aisp.peak.measure import load_peaks
    from aisp.report.roofline import peak_bandwidth

    peaks = load_peaks(hardware_key())
    return peak_bandwidth(peaks) if peaks and "memory_copy" in peaks["measurements"] else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("occupancy_sweep.png"), help="PNG path of the sweep plot")
    parser.add_argument("--n", type=int, default=SweepConfig.n, help="elements of x and y")
    args = parser.parse_args(argv)
    if reason := native.unavailable():
        print(f"occupancy_sweep: skipped, {reason}")
        return 0
    records, peak = measure(SweepConfig(n=args.n), torch.device("cuda")), hbm_peak()
    Console().print(table(records, peak))
    plot(records, peak, args.out)
    print(f"Plot saved to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
