"""Optimized w4a16, streaming variant (CUDA C++): the packed weights copied a whole step ahead per lane,
decoded in registers into mma.sync, and the split-K sum done inside the one launch.

Baseline (baseline_w4a16_gemm.py): decode all weights to a bf16 copy (1.07 GB written), then GEMM.
Optimized: w4a16_stream.cu. The prmt variant (Triton) was profiled at 105.6 us, 56% of DRAM: 4 programs
of 4 warps per SM capped by registers and shared memory, barriers every step, issue busy 59% with no
dominant stall, then two kernels for the split-K sum and the cast (11 us). Here one CTA of 16 warps per
SM (126 registers, no spills) stages x's K slice in shared memory once (128 KB); each lane copies its
8 x 16 bytes of a step (rows g, g + 8 of two 16-row blocks) with cp.async into slots of its own and
re-issues each half for the next step as soon as it has moved it into registers: 16 warps x 4 KB =
64 KB per SM in flight a whole step ahead, where Little's law asks 22 KB (4.2 TB/s / 132 SMs x 700 ns),
and no barrier in the loop. A 4-byte word feeds two mma.sync directly: a prmt puts each nibble under
bf16's exponent byte 0x43 (128 + code), HADD2 subtracts 136; the 16 k of an mma are any 16 k on which
A and B agree, so x needs no shuffle. The sm_90 loop: 539 instructions a step, 67 per 512 bytes read.
Split-K 4 (4 slices x 33 CTAs = 132): each unit's fp32 sums added with red.global.add.v2.f32, the last
slice to arrive writes bf16 and clears the workspace: no sum or cast kernels, one ctypes launch.
Expect (measured, H200, 2026-11-28): 0.1065 ms, 6.01x [5.84, 6.19] over 0.6437 ms, 2.62 TB/s, 62% of
HBM on 278 MB (estimated 0.072-0.085 ms, 78-91%); the prmt variant 0.1155 ms in the same run.
Run: python ch19/optimized_w4a16_gemm_stream.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

import ctypes
import dataclasses
from pathlib import Path

import torch
from baseline_w4a16_gemm import WORKLOAD, DequantizeThenGemm

import aisp
from aisp.kits import native

LIBRARY = native.Library((Path(__file__).resolve().parent / "w4a16_stream.cu",))
PTR, INT = ctypes.c_void_p, ctypes.c_int
SIGNATURES = {**dict.fromkeys(("w4a16_stream_gemm", "w4a16_tiled_gemm", "w4a16_swept_gemm"), [PTR] * 6 + [INT] * 5 + [PTR]),
              **dict.fromkeys(("w4a16_stream_emulate", "w4a16_tiled_emulate", "w4a16_swept_emulate"), [PTR] * 6 + [INT] * 5)}
"""The library's entry points: the row-major format's, the tiled format's (optimized_w4a16_gemm_tiled) and the
swept format's (optimized_w4a16_gemm_swept)."""
ROWS, WARPS, MAX_STEPS, TOKENS = 32, 16, 16, 16
"""As w4a16_stream.cuh: rows per unit, warps per CTA, 128-byte steps per K slice at most, tokens at most."""
STREAM_WORKLOAD = dataclasses.replace(WORKLOAD, requires=aisp.Requirements(
    cuda=True, executables=("nvcc",), min_compute_capability=(9, 0)))


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one (m, n, k) problem is cut: K slices, CTAs per slice, and the workspace (fp32 sums, 32 rows x
    16 tokens per unit, and one ticket counter per unit) that must be zeros before a call and is after."""

    m: int
    n: int
    k: int
    slices: int
    ctas: int
    sums: torch.Tensor
    tickets: torch.Tensor


def plan(m: int, n: int, k: int, sms: int, device: torch.device, max_steps: int = MAX_STEPS) -> Plan:
    """The fewest K slices of at most ``max_steps`` steps (x's slice must fit in shared memory), then as
    many CTAs per slice as SMs allow (one CTA per SM) and units need. ValueError for shapes it cannot run."""
    if not (1 <= m <= TOKENS and n >= ROWS and k >= 256 and k % 256 == 0):
        raise ValueError(f"w4a16_stream needs 1 <= M <= {TOKENS}, N >= {ROWS}, K a multiple of 256; got {m}, {n}, {k}")
    steps = k // 256
    slices = next(s for s in range(1, steps + 1) if steps % s == 0 and steps // s <= max_steps)
    units = -(-n // ROWS)
    ctas = max(1, min(sms // slices, -(-units // WARPS)))
    return Plan(m, n, k, slices, ctas, torch.zeros(units * ROWS * TOKENS, device=device),
                torch.zeros(units, dtype=torch.int32, device=device))


def arguments(p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, y: torch.Tensor) -> list:
    """The C entry points' arguments after checking the tensors against the plan."""
    if x.shape != (p.m, p.k) or packed.shape != (p.n, p.k // 2) or scale.shape != (p.n, p.k // 128):
        raise ValueError(f"shapes {tuple(x.shape)}, {tuple(packed.shape)}, {tuple(scale.shape)} do not fit the plan")
    if x.dtype != torch.bfloat16 or scale.dtype != torch.bfloat16 or packed.dtype != torch.uint8:
        raise ValueError("x and scale must be bf16, packed uint8")
    tensors = (x, packed, scale, y, p.sums, p.tickets)
    if not all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in tensors):
        raise ValueError("x, packed and scale must be contiguous and 16-byte aligned (16-byte copies)")
    return [native.ptr(t) for t in tensors] + [p.m, p.n, p.k, p.slices, p.ctas]


def stream_matmul(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor,
                  entry: str = "w4a16_stream_gemm") -> torch.Tensor:
    """``x @ w^T`` (bf16, M x N) by the kernel ``entry`` on x's GPU and current stream."""
    y = torch.empty(p.m, p.n, dtype=torch.bfloat16, device=x.device)
    native.check(getattr(lib, entry)(*arguments(p, x, packed, scale, y), native.stream(x.device)), entry)
    return y


def emulate(lib: ctypes.CDLL, p: Plan, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor,
            entry: str = "w4a16_stream_emulate") -> torch.Tensor:
    """The same product by the kernel's CPU emulation ``entry`` (CPU tensors; the library built for any GPU)."""
    y = torch.zeros(p.m, p.n, dtype=torch.bfloat16)
    native.check(getattr(lib, entry)(*arguments(p, x, packed, scale, y)), entry)
    return y


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` for x (M <= 16, K) bf16 on a GPU and ``w`` in ch19_w4's 4-bit format (builds the plan each call)."""
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    p = plan(x.shape[0], packed.shape[0], x.shape[1], sms, x.device)
    return stream_matmul(LIBRARY.load(x.device, SIGNATURES), p, x, packed, scale)


class StreamW4A16(DequantizeThenGemm):
    workload = STREAM_WORKLOAD

    def prepare(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.plan = plan(w.tokens, w.d_out, w.d_in, sms, self.device)
        self.sums, self.tickets = self.plan.sums, self.plan.tickets  # inputs to the harness: zeros after every call
        self.run()

    def run(self) -> torch.Tensor:
        return stream_matmul(self.lib, self.plan, self.x, self.packed, self.scale)


def get_benchmark() -> aisp.Benchmark:
    return StreamW4A16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
