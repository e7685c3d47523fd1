"""Optimized w4a16: one Triton GEMM that decodes the 4-bit weights in registers.

Baseline (baseline_w4a16_gemm.py): decode all weights to a bf16 copy (1.07 GB written), then GEMM.
Optimized: ``_w4a16_gemm`` below. Each program owns 128 output columns; per step it loads a 128 x 128
tile of packed bytes (256 weights per row: columns k0.. in the low nibbles, k0 + K/2.. in the high
ones), their two group scales and the matching 16 x 128 slices of x. Decoding is two integer ops
per weight: OR-ing a nibble into the bf16 pattern 0x4300 gives exactly 128 + u, no conversion
instruction (those run at 16/clk/SM on Hopper and would bound the kernel); the tensor cores
multiply x by (128 + code) - 136 = code - 8, and each group's dot is scaled once per output.
The only DRAM traffic is the 268 MB of packed weights (x, 512 KB, stays in L2).
Expect (measured, H200, 2026-11-27): 0.7726 -> 0.2394 ms, 3.23x (median ratio); 1.16 TB/s on the packed
weights (27.7% of HBM), within noise of the prmt variant (0.2358 ms); 2026-11-26: 0.7275 -> 0.2196 ms,
3.38x [3.31, 3.44], 30%: about 2x the 0.09-0.12 ms estimated (at the end), not yet profiled on a GPU.
The previous version measured 0.793 -> 0.326 ms, 2.44x [2.36, 2.52], 855 GB/s (20% of HBM); from its
sm_90 TTGIR/PTX (compiled on a CPU): 256 programs of 4 warps, about 2 per SM = 8 warps per SM, each
walking all 64 K steps with 12 bar.sync per step (the 136 * sum(x) correction was a cross-warp
reduction, the scales a layout conversion through shared memory): too few warps to hide the latency
of a long dependent loop, not HBM (its cp.async pipeline kept ~64 KB per SM ahead). Fixes (measured
above): split-K (SPLIT = 4 slices of K, 1024 programs, fp32 partials summed after: +4 MB of traffic,
two small kernels), num_stages 3 (49 KB of shared memory and 128 registers: 4 programs = 16 warps
per SM, 1.94 waves), and the weights enter the dot as (128 + code) - 136 = code - 8 (one native
add.bf16x2 per two weights) so no reduction remains: 6 bar.sync per step. Remaining limit (the
estimate's basis): the loop issues ~1,110 instructions per thread per 16 KB step (decoding on 16-bit
lanes: cvt, shr, prmt, or per weight pair); at 4 warps per program and 4 issue slots per clock that
caps an SM near 13 B/clk, ~3.4 TB/s at 1.98 GHz; estimated 0.09-0.12 ms (2.2-3 TB/s), measured 1.27
TB/s.
Run: python ch19/optimized_w4a16_gemm.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from baseline_w4a16_gemm import DequantizeThenGemm
from ch19_w4 import GROUP

import aisp

BN, BK = 128, 128
SPLIT = 4  # K slices: 256 column blocks x 4 = 1024 programs (see the header)


@triton.jit
def codes_plus_128(nibbles, dtype: tl.constexpr):
    """128 + code, exactly. In bf16 no conversion instruction is needed: exponent 2^7 (bits 0x4300)
    with the code in the low mantissa bits is 128 + code, since bf16's step at 128 is 1."""
    if dtype == tl.bfloat16:
        return (nibbles.to(tl.uint16) | 0x4300).to(tl.bfloat16, bitcast=True)
    else:
        return nibbles.to(dtype) + 128.0


@triton.jit
def _group_product(x, nibbles, scale):
    """sum_k x[m, k] * scale[n] * (code[n, k] - 8) over one 128-wide group, fp32 (BM, BN): the
    weights enter the dot as (128 + code) - 136 = code - 8, exact in bf16 (one packed bf16x2
    subtraction per two weights); the group's scale is applied once per output."""
    w = codes_plus_128(nibbles, x.dtype) - 136.0
    return tl.dot(x, tl.trans(w.to(x.dtype))) * scale[None, :].to(tl.float32)


@triton.jit
def _w4a16_gemm(x_ptr, p_ptr, s_ptr, part_ptr, M, N, K, GROUPS, HALF: tl.constexpr, SPLIT: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    """Program (i, s): columns i*BN.., the s-th of SPLIT slices of the packed K range; fp32 partial
    sums to part[s]."""
    rm = tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    split = tl.program_id(1)
    rows = rm[:, None] < M
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, HALF // SPLIT, BK):
        k0 = split * (HALF // SPLIT) + step
        rk = k0 + tl.arange(0, BK)
        packed = tl.load(p_ptr + rn[:, None] * HALF + rk[None, :])
        x_lo = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=rows, other=0.0)
        x_hi = tl.load(x_ptr + rm[:, None] * K + HALF + rk[None, :], mask=rows, other=0.0)
        acc += _group_product(x_lo, packed & 0xF, tl.load(s_ptr + rn * GROUPS + k0 // GROUP))
        acc += _group_product(x_hi, packed >> 4, tl.load(s_ptr + rn * GROUPS + (k0 + HALF) // GROUP))
    tl.store(part_ptr + split * M * N + rm[:, None] * N + rn[None, :], acc, mask=rows)


def split_k_partials(x: torch.Tensor, packed: torch.Tensor) -> tuple[int, int, int, int, torch.Tensor]:
    """(m, n, k, split, partials): the shapes checked, the K slices, and the fp32 buffer each slice's
    programs write their partial products to (summed after the launch)."""
    m, k = x.shape
    n = packed.shape[0]
    split = SPLIT if (k // 2) % (SPLIT * BK) == 0 else 1
    if m > 16 or (k // 2) % BK or n % BN or not x.is_contiguous():
        raise ValueError(f"w4a16_matmul needs M <= 16, K a multiple of {2 * BK}, N of {BN}")
    return m, n, k, split, torch.empty(split, m, n, device=x.device, dtype=torch.float32)


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` for x (M <= 16, K) and ``w`` in ch19_w4's 4-bit format, multiplied in x's dtype (bf16 on
    a GPU; fp32 in the CPU tests: the Triton interpreter multiplies bf16 tiles wrongly)."""
    m, n, k, split, part = split_k_partials(x, packed)
    _w4a16_gemm[(n // BN, split)](x, packed, scale, part, m, n, k, k // GROUP, HALF=k // 2, SPLIT=split,
                                  BM=16, BN=BN, BK=BK, GROUP=GROUP, num_warps=4, num_stages=3)
    return part.sum(0).to(x.dtype)


class FusedW4A16(DequantizeThenGemm):
    def prepare(self) -> None:
        self.run()

    def run(self) -> torch.Tensor:
        return w4a16_matmul(self.x, self.packed, self.scale)


def get_benchmark() -> aisp.Benchmark:
    return FusedW4A16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
