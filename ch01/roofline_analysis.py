"""Roofline analysis: a vector add (memory-bound) and a matrix multiply (compute-bound) on this machine.

For each kernel: arithmetic intensity (FLOPs per byte of memory traffic), the achieved TFLOP/s,
the roof that binds it (memory bandwidth below the ridge point, the matmul rate above it) and
how close it gets. The ceilings are this machine's own: ``aisp peak``'s cached figures when
present (peaks/peak_<key>.json), otherwise measured here with the same probes (a device
memory copy and a dense matmul). Saves a roofline PNG.
Run: python ch01/roofline_analysis.py [--out roofline.png] [--device cpu]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aisp.harness.environment import hardware_key
from aisp.peak import probes as peak_probes
from aisp.peak.measure import load_peaks
from aisp.report.roofline import bound_tflops, peak_bandwidth, peak_compute


@dataclass(frozen=True)
class Kernel:
    name: str
    flops: float
    bytes: float
    precision: str
    call: Callable[[], object]

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def vector_add(n: int, device: torch.device) -> Kernel:
    """c = a + b in fp32: 1 FLOP per 12 bytes (two reads, one write)."""
    a, b = torch.rand(n, device=device), torch.rand(n, device=device)
    c = torch.empty_like(a)
    return Kernel("Vector Add", n, 12.0 * n, "fp32", lambda: torch.add(a, b, out=c))


def matrix_multiply(n: int, device: torch.device) -> Kernel:
    """C = A @ B (n x n): 2n^3 FLOPs over 3n^2 elements; bf16 on a GPU, fp32 on a CPU."""
    precision, dtype = ("bf16", torch.bfloat16) if device.type == "cuda" else ("fp32", torch.float32)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    c = torch.empty_like(a)
    size = a.element_size()
    return Kernel("Matrix Multiply", 2.0 * n**3, 3.0 * n * n * size, precision, lambda: torch.matmul(a, b, out=c))


def ceilings(device: torch.device, precisions: set[str]) -> dict[str, Any]:
    """Cached peaks for this machine when they hold what is needed, else measured now."""
    key = hardware_key() if device.type == "cuda" else "cpu"
    cached = load_peaks(key)
    wanted = {f"matmul_{p}" for p in precisions} | {"memory_copy"}
    if cached and wanted <= cached["measurements"].keys():
        return cached
    cfg = peak_probes.PeakConfig(repeats=5)
    measured = {"memory_copy": peak_probes.memory_copy(cfg, device)}
    for p in precisions:
        measured[f"matmul_{p}"] = peak_probes.matmul(p, cfg, device)
    return {"measurements": measured, "provenance": {"hardware_key": key}, "source": "measured by this run"}


def achieved_tflops(kernel: Kernel, device: torch.device, repeats: int = 20) -> float:
    ms = peak_probes.median_ms(kernel.call, device, repeats, warmup=3)
    return kernel.flops / (ms * 1e-3) / 1e12


def describe(kernel: Kernel, tflops: float, peaks: dict[str, Any]) -> list[str]:
    """The seed's report for one kernel: intensity, achieved rate, the binding roof."""
    _, peak = peak_compute(peaks, kernel.precision)
    bw = peak_bandwidth(peaks)
    ridge = peak * 1e3 / bw
    bound = bound_tflops(kernel.intensity, peak, bw)
    share = f"{100 * tflops / bound:.0f}% of its roof"
    if kernel.intensity < ridge:
        achieved = f"{tflops:.3g} TFLOPS ({tflops * 1e3 / kernel.intensity:,.0f} GB/s, {share})"
        verdict = f"Memory-bound (AI {kernel.intensity:.3g} << ridge {ridge:.3g})"
    else:
        achieved = f"{tflops:.3g} TFLOPS ({share}: {peak:.3g} TFLOPS {kernel.precision} peak)"
        verdict = f"Compute-bound (AI {kernel.intensity:.3g} > ridge {ridge:.3g})"
    return [f"{kernel.name}:", f"  AI: {kernel.intensity:.3g} FLOP/Byte", f"  Achieved: {achieved}",
            f"  {verdict}"]


def plot(points: list[tuple[Kernel, float]], peaks: dict[str, Any], path: Path) -> None:
    """Log-log roofline: one roof per precision, one point per kernel."""
    from aisp.report.plotting import new_figure

    fig, ax = new_figure(width=7, height=4.5)
    bw = peak_bandwidth(peaks)
    xs = [k.intensity for k, _ in points]
    lo, hi = min(xs) / 10, max(xs) * 10
    for precision in sorted({k.precision for k, _ in points}):
        _, peak = peak_compute(peaks, precision)
        ridge = peak * 1e3 / bw
        ax.plot([lo, ridge, hi], [lo * bw / 1e3, peak, peak], label=f"{precision} roof: {peak:.3g} TFLOP/s")
    for kernel, tflops in points:
        ax.plot(kernel.intensity, tflops, "o")
        ax.annotate(kernel.name, (kernel.intensity, tflops), xytext=(6, -10), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)", ylabel="TFLOP/s",
           title=f"Roofline ({peaks['provenance']['hardware_key']}, memory roof {bw:,.0f} GB/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("roofline.png"), help="PNG path of the roofline plot")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA when present), cpu or cuda")
    parser.add_argument("--vector-n", type=int, default=None, help="vector length (default 256M GPU, 16M CPU)")
    parser.add_argument("--matmul-n", type=int, default=None, help="matrix size (default 8192 GPU, 1024 CPU)")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() if args.device == "auto" else args.device == "cuda"
    device = torch.device("cuda" if gpu else "cpu")
    kernels = [vector_add(args.vector_n or (1 << 28 if gpu else 1 << 24), device),
               matrix_multiply(args.matmul_n or (8192 if gpu else 1024), device)]
    peaks = ceilings(device, {k.precision for k in kernels})
    name = torch.cuda.get_device_name(device) if gpu else "CPU"
    print(f"Roofline analysis on {name} (ceilings: {peaks['source']})\n")
    points = [(k, achieved_tflops(k, device)) for k in kernels]
    for kernel, tflops in points:
        print("\n".join(describe(kernel, tflops, peaks)) + "\n")
    plot(points, peaks, args.out)
    print(f"Roofline plot saved to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
