"""Optimized w4a16, swept variant (CUDA C++): the tiled kernel's 4 KB unit steps stored step-major, so the
warps of a K slice, all near the same step of consecutive units, read one compact front of memory that
sweeps through the weights as a plain front-to-back read does.

Baseline (baseline_w4a16_gemm.py): decode all weights to a bf16 copy (1.07 GB written), then GEMM.
Optimized: w4a16_stream.cu's loop (optimized_w4a16_gemm_tiled.py, the pair's best: 0.0885-0.0900 ms, 73-74% of
the HBM copy ceiling) instantiated for a third stored format (w4a16_swept; the row-major and tiled kernels'
sm_90 SASS unchanged). What the README's sweep (H200, 2026-11-30) found: `_tiled` at N = 32k..128k fits
t = a + bytes / rate with a ~ 0 (x staging, split-K finish, launch are not the gap) and a steady rate of
3.19-3.35 TB/s, where a torch sum over the same packed bytes reads 3.88 TB/s (92% of copy). Fewer
instructions (the folded variant), bulk copies (the bulk variant) and 64 KB a SM in flight all tied, so
what is left is the order in which HBM is asked for the bytes. In the tiled format a warp's K slice of a
unit is one 64 KB run and its steps follow each other; at any moment the 2,112 warps ask for 4 KB pieces
of 2,112 runs 64 KB apart, each run's next piece a step later (an inference: HBM's row and channel hashing
is not documented, so whether this costs open pages is what the measurement decides). Here swept_w4 stores unit u's global step s at (s * units + u) * 4 KB (tile_w4's bytes,
the unit and step axes swapped; scales as tiled): a slice's 528 warps, on consecutive units, read one
contiguous 2.1 MB front of step s, then of step s + 1 (4 MB on), as a plain read walks memory. Lane
offsets, copies a step ahead (64 KB a SM), decode, mma, split-K 4 x 33 CTAs and the in-kernel sum are the
tiled kernel's; the loop's address step is a plan's front (units x 4 KB) instead of 4 KB: 526 instructions
a step (528), 114 registers, no spills. Same launch, same bytes (278 MB).
Estimate (not measured): if the scattered runs are what hold the steady stream at ~3.3 TB/s, it can rise
toward the plain read's 3.88 TB/s less the 3% unit imbalance (1,024 units over 528 warps a slice, 2 for the
busiest): 278 MB at 3.4-3.75 TB/s plus ~1-2 us is 0.076-0.083 ms, 80-87% of the copy ceiling (0.0824 ms is
80%); if DRAM page order is not it, a tie with `_tiled` (0.086-0.089 ms).
Expect: 0.0882 ms on an H200 (2026-11-30), 74.7% of the copy ceiling; _tiled 0.0896 ms in the same run.
Run: python ch19/optimized_w4a16_gemm_swept.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

import ctypes

import torch
from ch19_w4 import ROWS, STEP, tile_w4
from optimized_w4a16_gemm_stream import LIBRARY, SIGNATURES, Plan, StreamW4A16, emulate, stream_matmul
from optimized_w4a16_gemm_tiled import tiled_plan

import aisp

GEMM, EMULATE = "w4a16_swept_gemm", "w4a16_swept_emulate"


def swept_w4(packed: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ch19_w4's row-major bytes and scales in the swept format (shapes kept; N a multiple of 32, K of 256):
    tile_w4's 4 KB run of unit u's step s moved to (s * units + u) * 4 KB; the scales are tile_w4's.
    Done once, when the weights are packed, as a deployment stores them."""
    tiled, scales = tile_w4(packed, scale)
    n, half = packed.shape
    units, steps = n // ROWS, half // STEP
    swept = tiled.reshape(units, steps, ROWS * STEP).transpose(0, 1)
    return swept.contiguous().reshape(n, half), scales


swept_plan = tiled_plan
"""The stream variant's plan (the fewest K slices, one CTA per SM); whole 32-row units only."""


def swept_matmul(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` (bf16) from swept_w4's packed bytes and scales, on x's GPU and current stream."""
    return stream_matmul(lib, p, x, packed, scale, GEMM)


def swept_emulate(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The same product by the kernel's CPU emulation (CPU tensors)."""
    return emulate(lib, p, x, packed, scale, EMULATE)


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` from ch19_w4's row-major format (swept here, each call: for tests, not for timing)."""
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    p = swept_plan(x.shape[0], packed.shape[0], x.shape[1], sms, x.device)
    return swept_matmul(LIBRARY.load(x.device, SIGNATURES), p, x, *swept_w4(packed, scale))


class SweptW4A16(StreamW4A16):
    def prepare(self) -> None:
        self.packed, self.scale = swept_w4(self.packed, self.scale)  # the stored format, once
        super().prepare()

    def run(self) -> torch.Tensor:
        return swept_matmul(self.lib, self.plan, self.x, self.packed, self.scale)


def get_benchmark() -> aisp.Benchmark:
    return SweptW4A16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
