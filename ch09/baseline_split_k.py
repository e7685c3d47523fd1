"""Baseline split-K: a tall-skinny GEMM (M = N = 512, K = 131,072) in a Triton kernel that fills 16 SMs.

Baseline: C = A @ B in bf16 (68.7 GFLOP) with ``matmul_kernel`` (ch09_matmul.py), 128 x 128 x 64
tiles, 8 warps, 4 stages: a 512 x 512 output is only 16 tiles, so 16 programs each run a
131,072-deep loop while 116 of the 132 SMs idle. The kernel is efficient per SM; the grid is
too small. (torch.matmul is the optimized_split_k_cublas.py variant: cuBLAS's heuristic splits K
for such shapes by itself.)
Optimized (optimized_split_k.py): the same kernel with ``split_k=8``: 16 tiles x 8 K-slices =
128 programs (one wave on 132 SMs), each 16,384 deep, writing fp32 partials (8 MiB); a second
kernel sums the 8 partials per element and rounds once to bf16. Extra traffic: 16 MiB beside the
256 MiB of operands. Intensity 256 FLOP/byte: just above the bf16 ridge (~186 on an H200).
Same fp32 accumulation; only the order of the K sums differs (bf16 tolerance).
Expect (measured, H200, 2026-11-23): one-slice Triton GEMM 0.770 ms (89 TFLOP/s); Triton split-K
0.155 ms, 5.0x (444 TFLOP/s, 57% of the bf16 tensor-core rate); torch.matmul 0.140 ms, 5.5x [4.4,
6.9] (491 TFLOP/s, 63%). CPU: not run (Triton on CUDA; its CPU test uses the Triton interpreter).
Run: python ch09/baseline_split_k.py  |  aisp bench run -t ch09:split_k
"""

from __future__ import annotations

from baseline_register_tiling import GemmWorkload, gemm_workload
from baseline_triton_matmul import TritonMatmul

import aisp

WORKLOAD = gemm_workload(GemmWorkload(m=512, n=512, k=131072), 2, "bf16",
                         ceiling_note="profiled (ncu, H200): 12% is the baseline's (16 CTAs, tensor pipe 9.7%; the optimized ruled errors); split-K: cuBLAS 99 us at tensor pipe 87%, Triton 72%",
                         requires=aisp.Requirements(cuda=True, packages=("triton",)))


class UnsplitMatmul(TritonMatmul):
    workload = WORKLOAD
    tiling = {"bm": 128, "bn": 128, "bk": 64, "group_m": 8, "warps": 8, "stages": 4, "split_k": 1}


def get_benchmark() -> aisp.Benchmark:
    return UnsplitMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
