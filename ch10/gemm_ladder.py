"""The GEMM ladder in numbers: every rung's TFLOP/s beside cuBLAS (torch.matmul) on the same GEMM.

Checks each rung against torch.matmul, times it (median of CUDA-event timings), and prints one
row per rung: ms, TFLOP/s, share of cuBLAS measured now, share of the machine's bf16 peak (from
``aisp peak``'s stored ceilings when there are some). Hopper-only rungs are skipped on other GPUs.
Run: python ch10/gemm_ladder.py [--size 8192] [--repeats 20]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from ch10_common import HOPPER_ONLY, KERNELS, check_against_torch, load_gemm, run_gemm

from aisp.harness.environment import hardware_key
from aisp.kits import native
from aisp.peak.measure import load_peaks
from aisp.peak.probes import median_ms


@dataclass(frozen=True)
class Rung:
    name: str
    """A key of KERNELS, or "cublas" for torch.matmul."""
    ms: float
    """Median time of one call."""


def table(rungs: Sequence[Rung], flops: float, peak_tflops: float | None) -> list[str]:
    """The ladder's rows: name, ms, TFLOP/s, % of the cuBLAS row, % of the peak (when known)."""
    cublas = next(r.ms for r in rungs if r.name == "cublas")
    lines = [f"{'kernel':<10} {'ms':>8} {'TFLOP/s':>8} {'% cuBLAS':>9} {'% peak':>7}"]
    for r in rungs:
        tflops = flops / (r.ms * 1e-3) / 1e12
        peak = f"{100 * tflops / peak_tflops:6.0f}%" if peak_tflops else "      -"
        lines.append(f"{r.name:<10} {r.ms:8.3f} {tflops:8.1f} {100 * cublas / r.ms:8.0f}% {peak}")
    return lines


def measure(size: int, repeats: int, device: torch.device) -> list[Rung]:
    """Check and time every rung this GPU runs, then torch.matmul, on size^3 bf16."""
    gen = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen) for _ in range(2))
    c = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    rungs = []
    for name in KERNELS:
        if native.unavailable(device, hopper_only=name in HOPPER_ONLY):
            continue
        lib = load_gemm(name, device)
        check_against_torch(run_gemm(lib, a, b, c), a, b, name)
        rungs.append(Rung(name, median_ms(lambda lib=lib: run_gemm(lib, a, b, c), device, repeats)))
    rungs.append(Rung("cublas", median_ms(lambda: torch.matmul(a, b.T, out=c), device, repeats)))
    return rungs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192, help="M = N = K (a multiple of 256)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per kernel; the median is reported")
    args = parser.parse_args(argv)
    if reason := native.unavailable():
        print(f"skipped: {reason}")
        return 0
    device = torch.device("cuda")
    peaks = load_peaks(hardware_key())
    peak = peaks["measurements"]["matmul_bf16"]["value"] if peaks and "matmul_bf16" in peaks["measurements"] else None
    print(f"GEMM ladder on {torch.cuda.get_device_name(device)}: {args.size}^3 bf16, fp32 accumulation"
          + (f"; bf16 peak {peak:.0f} TFLOP/s ({peaks['source']})" if peak else ""))
    rungs = measure(args.size, args.repeats, device)
    print("\n".join(table(rungs, 2.0 * args.size**3, peak)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
