"""Optimized MLA decode, fused variant with a lean query and output: 6 kernels a step where ``_fused`` runs 13.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_fused.py's step (weight absorption, one Triton split-KV kernel
over the latent cache, the merge), less its small kernels. Its torch trace (H200, 2026-11-29) spent
41 of 128 us a call outside the cache kernel, in 12 kernels: the query projection, then a neg, a
``cat`` and three elementwise kernels for the RoPE rotation, a bmm for ``q_nope @ W_UK``, a ``cat``
joining the two query parts; after the merge a bmm for ``W_UV`` and a copy for its transposed
output, then the output projection. Here:
- ``absorbed_query`` (ch18_mla_query.py): ONE Triton kernel writes the (batch, heads, 576) query:
  per (head, 128-wide latent block) ``q_nope @ W_UK`` on the tensor cores (fp32 sums, as the bmm),
  and the rotated RoPE query (fp32, rounded once where the parent rounds after each of 3 ops);
  it replaces 7 kernels (the bmm, 2 cats, the neg, 3 elementwise; ~19 us in that trace);
- the ``W_UV`` bmm writes into the (batch, heads x 128) output through a transposed view (cuBLAS
  takes the strided C: batch stride 128, ldc 2,048), so no copy before the output projection;
- 8 context slices, not 16: the GPU test's do_bench of the attention alone (H200, 2026-11-29) timed
  the kernel and merge at 92.9 us with 8 and 100.9 with 16; half the fp32 partials (8.4 MB each way).
Same inputs, same weights (W_UK and W_UV split once in setup, as the parents), same output.
``SLICE`` and ``SPLITS`` (module constants, the measured ones) set ``_slice``'s BLOCK_N, stages and
warps and the slice count; ``python ch18/kernel_sweep.py mla`` times others.
Expect (measured, H200, 2026-11-29): 5.646 -> 0.1120 ms, 50.37x [48.99, 51.80], 69.5% of HBM (2.92 TB/s),
the pair's best; ``_fused`` 0.1446 ms, the two-bmm step 0.249 ms (estimated 0.105-0.12 ms). Profiled
(torch profiler, H200, 2026-11-29): 103 us of kernels a call, ``_slice`` 81.2 (72% of the 0.112 ms;
Nsight Compute of ``_fused``'s 16-slice launch: DRAM 75%, 3.62 TB/s, two programs of 4 warps an SM,
93 KB of shared memory each), two GEMMs 12.0 + 3.8, ``_absorb`` 3.4, ``_merge`` 3.0. 80% (0.097 ms) needs ``_slice`` faster
(more loads in flight: 3-4 programs an SM at less shared memory, or 8 warps; the sweep's settings)
and the 12 us GEMM (a 12.6 MB query projection would take ~3 us at HBM speed, if it is that one).
Run: python ch18/optimized_mla_absorption_fused_qo.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_kernel import SliceConfig, latent_attention
from ch18_mla_query import absorbed_query
from optimized_mla_absorption_fused import FusedLatentMLA

import aisp

SPLITS = 8
"""Context slices per sequence: 32 x 8 = 256 programs, ~2 per H200 SM (one wave at two an SM)."""
SLICE = SliceConfig(block_n=32, stages=3, warps=4)
"""``_slice``'s settings, the measured ones; ``python ch18/kernel_sweep.py mla`` times others and
prints the line to put here (and SPLITS) from its best verified row."""


class LeanFusedLatentMLA(FusedLatentMLA):
    splits = SPLITS
    slice_config = SLICE

    def run(self) -> torch.Tensor:
        return self.front() @ self.w_o.T

    def front(self) -> torch.Tensor:
        """The step up to the output projection: (batch, heads x v_dim)."""
        w = self.workload
        q_all = absorbed_query(self.x @ self.w_q.T, self.w_uk, self.cos, self.sin, w.rope)
        o_lat = self.attend(q_all)
        o = o_lat.new_empty(w.batch, w.heads * w.v_dim)
        torch.bmm(o_lat.transpose(0, 1), self.w_uv_t, out=o.view(w.batch, w.heads, w.v_dim).transpose(0, 1))
        return o

    def attend(self, q_all: torch.Tensor) -> torch.Tensor:
        return latent_attention(q_all, self.cache, self.workload.rope, self.scale, self.splits, self.slice_config)


def get_benchmark() -> aisp.Benchmark:
    return LeanFusedLatentMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
