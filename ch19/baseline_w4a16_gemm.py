"""Baseline w4a16: decode-shaped GEMM (16 tokens x 16384 -> 32768) with 4-bit weights dequantized
to bf16 on every call.

Weights are stored in 4 bits (two per byte, one bf16 scale per 128 values: ch19_w4), 268 MB
instead of 1.07 GB in bf16. Baseline: each call decodes the whole matrix to bf16 in one compiled
pass (reads 268 MB, writes 1.07 GB), then cuBLAS multiplies the 16 tokens by it (reads 1.07 GB
again): ~2.4 GB of traffic for 17 GFLOP. At M = 16 the GEMM is bound by the weight bytes.
Optimized (optimized_w4a16_gemm.py): a Triton GEMM loads the packed bytes and decodes them in
registers right before the tensor-core multiply: 268 MB read, no bf16 copy ever written.
Expect (measured, H200, 2026-11-27): baseline 0.7726 ms; optimized (split-K 4) 0.2394 ms, 3.23x,
1.16 TB/s on the packed weights (27.7% of HBM); the prmt variant 0.2358 ms, 3.23x [2.90, 3.61] (best,
28.1%): within noise of each other, about 2x the 0.09-0.13 ms estimated; not profiled on a GPU.
2026-11-26: 0.7275 -> 0.2196 ms, 3.38x [3.31, 3.44], 30%. The first kernel (no split-K, a cross-warp
reduction per step) measured 0.793 -> 0.326 ms, 2.44x [2.36, 2.52], 855 GB/s (20% of HBM).
Tolerance: bf16 defaults. The baseline rounds each decoded weight scale * (u - 8) to bf16 (relative
error <= 2^-9); the kernel multiplies the exact codes and applies the fp32 scale after each group's
dot, and accumulates in another order: ~1e-3 relative L2 apart, well inside bf16's 2e-2.
Run: python ch19/baseline_w4a16_gemm.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from ch19_w4 import dequantize_w4, quantize_w4

import aisp


@dataclass(frozen=True, kw_only=True)
class W4Workload(aisp.Workload):
    tokens: int = 16
    d_in: int = 16384
    d_out: int = 32768


def w4_workload(**kw: object) -> W4Workload:
    """Bytes: the packed weights, their scales, x and y, each once."""
    w = W4Workload(**{k: v for k, v in kw.items() if k in ("tokens", "d_in", "d_out")})
    weights = w.d_out * w.d_in / 2 + w.d_out * w.d_in / 128 * 2
    io = 2.0 * w.tokens * (w.d_in + w.d_out)
    return W4Workload(**kw, flops=2.0 * w.tokens * w.d_in * w.d_out, bytes=weights + io, items=w.tokens,
                      item_unit="tokens")


WORKLOAD = w4_workload(precision="bf16", requires=aisp.Requirements(cuda=True, packages=("triton",)),
                       ceiling_note="ncu (H200): _swept 86.7 us, DRAM 68.0%, SM 49.2%, occupancy 23%; top stalls math_pipe_throttle 1.51, not_selected 1.27 (_tiled: L2 82.6%, DRAM 66.5%)")


class DequantizeThenGemm(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.x = torch.randn(w.tokens, w.d_in, generator=gen, device=self.device).bfloat16()
        weight = torch.randn(w.d_out, w.d_in, generator=gen, device=self.device) / w.d_in ** 0.5
        self.packed, self.scale = quantize_w4(weight)
        self.prepare()

    def prepare(self) -> None:
        self.dequantize: Callable = torch.compile(dequantize_w4) if self.device.type == "cuda" else dequantize_w4
        self.run()

    def run(self) -> torch.Tensor:
        return F.linear(self.x, self.dequantize(self.packed, self.scale))


def get_benchmark() -> aisp.Benchmark:
    return DequantizeThenGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
