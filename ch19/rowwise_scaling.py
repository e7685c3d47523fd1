"""Per-tensor vs row-wise fp8 scales: the error of an e4m3 GEMM against fp32, with and without outliers.

One scale per tensor maps the tensor's largest |value| to 448, e4m3's largest; every other value
is rounded on the same grid. e4m3's normal range spans 2^-6 to 448 (2^15), so outliers 100x larger
than the rest cost little; when a few rows hold values 10^4x larger (outlier tokens after an
unnormalized sum, gradients of a rare token), the grid is set by them and the ordinary rows fall
into e4m3's subnormals, where few bits remain, or flush to zero. Row-wise scaling gives each row of x, and
each output channel of w, its own scale (shapes (M, 1) and (1, N); ``_scaled_mm`` applies them in the
epilogue, bf16 output only); each row uses the full 3-bit mantissa again.

Why a tool and not a pair: both run the same fp8 GEMM at the same speed; they differ in accuracy,
which a pair's verification cannot rank. The table prints relative L2 and max abs error against
an fp32 product for each case and, on a GPU, the time of each ``_scaled_mm``.
Run: python ch19/rowwise_scaling.py [--size 4096]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from ch19_fp8 import E4M3, FP8_MAX

CASES = {
    "gaussian": (0, 1.0),
    "1% rows x100": (0.01, 1e2),
    "1% rows x1e4": (0.01, 1e4),
    "1% rows x1e5": (0.01, 1e5),
}
"""name: (share of x's rows scaled up, by how much)."""


def quantize(t: torch.Tensor, rowwise: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(t as e4m3, fp32 dequant scale): one per tensor, or one per row (shape (rows, 1))."""
    top = t.abs().float().amax(dim=1, keepdim=True) if rowwise else t.abs().float().amax()
    scale = top.clamp_min(1e-12) / FP8_MAX[E4M3]
    return (t.float() / scale).clamp(-FP8_MAX[E4M3], FP8_MAX[E4M3]).to(E4M3), scale


def fp8_matmul(x: torch.Tensor, w: torch.Tensor, rowwise: bool) -> torch.Tensor:
    """bf16 x @ w^T with both operands in e4m3, per-tensor or row-wise scaled."""
    xq, xs = quantize(x, rowwise)
    wq, ws = quantize(w, rowwise)
    return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws.t() if rowwise else ws,
                            out_dtype=torch.bfloat16)


def operands(size: int, share: float, factor: float, gen: torch.Generator,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 x (size, size) with ``share`` of its rows scaled by ``factor``, and w (size, size)."""
    x = torch.randn(size, size, generator=gen, device=device)
    rows = torch.randperm(size, generator=gen, device=device)[: int(share * size)]
    x[rows] *= factor
    w = torch.randn(size, size, generator=gen, device=device) / size ** 0.5
    return x.bfloat16(), w.bfloat16()


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(relative L2 error of the ordinary-magnitude output, max abs error) against ``ref``."""
    diff = out.float() - ref
    return float(diff.norm() / ref.norm()), float(diff.abs().max())


def time_ms(fn: Callable[[], torch.Tensor], device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    from triton.testing import do_bench
    return float(do_bench(fn))


def report(size: int, device: torch.device) -> list[dict[str, object]]:
    """One row per (case, scaling): errors against fp32 and, on a GPU, milliseconds."""
    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    for case, (share, factor) in CASES.items():
        x, w = operands(size, share, factor, gen, device)
        ordinary = (x.float().abs().amax(dim=1) <= 10)
        ref = x.float() @ w.float().t()
        for rowwise in (False, True):
            out = fp8_matmul(x, w, rowwise)
            rel, worst = errors(out[ordinary], ref[ordinary])
            rows.append(dict(case=case, scaling="row-wise" if rowwise else "per-tensor", rel_l2=rel,
                             max_abs=worst, ms=time_ms(lambda a=x, b=w, r=rowwise: fp8_matmul(a, b, r), device)))
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096 if torch.cuda.is_available() else 512, help="M = N = K of the GEMM (default 4096 on a GPU, 512 on a CPU)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where the GEMM runs (default: cuda when present)")
    args = parser.parse_args(argv)
    rows = report(args.size, torch.device(args.device))
    print(f"e4m3 GEMM {args.size}^3 vs fp32, errors on the ordinary rows ({args.device}; ms: quantize + GEMM)")
    print(f"{'case':<18}{'scaling':<12}{'rel L2':>10}{'max abs':>10}{'ms':>9}")
    for r in rows:
        ms = f"{r['ms']:.3f}" if r["ms"] is not None else "-"
        print(f"{r['case']:<18}{r['scaling']:<12}{r['rel_l2']:>10.4f}{r['max_abs']:>10.4f}{ms:>9}")
    return rows


if __name__ == "__main__":
    main()
