"""Optimized w4a16, swept folded variant (CUDA C++): the swept kernel with the decode's -136 taken out of the
loop, applied once per 128-weight group through the first mma's accumulator input.

Baseline (baseline_w4a16_gemm.py): decode all weights to a bf16 copy (1.07 GB written), then GEMM.
Optimized: w4a16_stream.cu's loop on the swept format (optimized_w4a16_gemm_swept.py, the pair's best: 0.0882
ms, 74.7% of the HBM copy ceiling), with the folded decode of the removed `_folded` variant (README section 4)
as a fourth instantiation (w4a16_folded_swept; the row-major, tiled and swept kernels' sm_90 SASS unchanged).
Nsight Compute of `_swept` (H200): 86.7 us, DRAM 68.0%, SM 49.2%, top stall math_pipe_throttle (1.51), then
not_selected and wait: its warps now wait on a math pipe more than on loads. `_folded` tied `_tiled` when the
read order held it (no dominant stall then); with the swept order the pipes lead. A group's dot with the raw
codes 128 + c is its dot with c - 8 plus 136 * sum(x), so the loop feeds the prmt's 128 + c to the mma and
each group's first mma takes -136 * (the group's sum of x) as its C operand, a 16-byte shared load computed
once per CTA from its staged x (8 mma per step, nibble half and token half; 4 KB of shared memory). Step
loop (sm_90, nvcc 13.0): 398 instructions (526), no HADD2, no MOV for C, 126 registers, no spills; bytes
(278 MB), swept_w4's format, split-K and launch are `_swept`'s. Numerics: fp32 sums of values ~30x a group's
dot (a mean code of 136 against a spread of ~4.6): rounding ~2^-19 of it, far inside bf16's tolerance.
Estimate (arithmetic, not a measurement): a quarter fewer issue slots a step, none of them the HADD2's pipe
work; if math pipe pressure holds `_swept` at 68% DRAM, toward the plain read's 3.88 TB/s:
0.076-0.083 ms (80-87% of the copy ceiling; 80% is 0.0824 ms); if not, a tie with `_swept` (0.088 ms).
Expect: not yet measured on a GPU.
Run: python ch19/optimized_w4a16_gemm_swept_folded.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

import ctypes

import torch
from optimized_w4a16_gemm_stream import LIBRARY, SIGNATURES, Plan, emulate, stream_matmul
from optimized_w4a16_gemm_swept import SweptW4A16, swept_plan, swept_w4

import aisp

__all__ = ["LIBRARY", "SIGNATURES", "swept_plan", "swept_w4"]  # what the tests build, plan and store with
GEMM, EMULATE = "w4a16_swept_folded_gemm", "w4a16_swept_folded_emulate"


def folded_matmul(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` (bf16) from swept_w4's packed bytes and scales, on x's GPU and current stream."""
    return stream_matmul(lib, p, x, packed, scale, GEMM)


def folded_emulate(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The same product by the kernel's CPU emulation (CPU tensors)."""
    return emulate(lib, p, x, packed, scale, EMULATE)


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` from ch19_w4's row-major format (swept here, each call: for tests, not for timing)."""
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    p = swept_plan(x.shape[0], packed.shape[0], x.shape[1], sms, x.device)
    return folded_matmul(LIBRARY.load(x.device, SIGNATURES), p, x, *swept_w4(packed, scale))


class SweptFoldedW4A16(SweptW4A16):
    def run(self) -> torch.Tensor:
        return folded_matmul(self.lib, self.plan, self.x, self.packed, self.scale)


def get_benchmark() -> aisp.Benchmark:
    return SweptFoldedW4A16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
