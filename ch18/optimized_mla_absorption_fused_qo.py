"""Optimized MLA decode, fused variant with a lean query and output: 6 kernels a step where ``_fused`` runs 13.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_fused.py's step (weight absorption, one Triton split-KV kernel
over the latent cache, the merge), less its small kernels. Its torch trace (H200, 2026-11-29) spent
41 of 128 us a call outside the cache kernel, in 12 kernels: the query projection, then a neg, a
``cat`` and three elementwise kernels for the RoPE rotation, a bmm for ``q_nope @ W_UK``, a ``cat``
joining the two query parts; after the merge a bmm for ``W_UV`` and a copy for its transposed
output, then the output projection. Here:
- ``absorbed_query`` (ch18_mla_kernel.py): ONE Triton kernel writes the (batch, heads, 576) query:
  per (head, 128-wide latent block) ``q_nope @ W_UK`` on the tensor cores (fp32 sums, as the bmm),
  and the rotated RoPE query (fp32, rounded once where the parent rounds after each of 3 ops);
  it replaces 7 kernels (the bmm, 2 cats, the neg, 3 elementwise; ~19 us in that trace);
- the ``W_UV`` bmm writes into the (batch, heads x 128) output through a transposed view (cuBLAS
  takes the strided C: batch stride 128, ldc 2,048), so no copy before the output projection;
- 8 context slices, not 16: the GPU test's do_bench of the attention alone (H200, 2026-11-29) timed
  the kernel and merge at 92.9 us with 8 and 100.9 with 16; half the fp32 partials (8.4 MB each way).
Same inputs, same weights (W_UK and W_UV split once in setup, as the parents), same output.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the parent's 0.1432 ms less the
7 kernels (~19 us) plus one (~2-3 us), the copy (~2 us), ~7 launch gaps (~1.2 us each, the parent's
15 us of gaps over 13 kernels) and ~5-8 us of the 8-slice attention: ~0.105-0.12 ms, 0.327 GB
at 2.7-3.1 TB/s, 65-74% of HBM (parent 54%). 80% (0.097 ms) needs the cache kernel itself faster
(87 us at 75% of DRAM): it is ~80% of the estimated step.
Run: python ch18/optimized_mla_absorption_fused_qo.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_kernel import absorbed_query, latent_attention
from optimized_mla_absorption_fused import FusedLatentMLA

import aisp


class LeanFusedLatentMLA(FusedLatentMLA):
    splits = 8
    """Context slices per sequence: 32 x 8 = 256 programs, ~2 per H200 SM (one wave at two an SM)."""

    def run(self) -> torch.Tensor:
        w = self.workload
        q_all = absorbed_query(self.x @ self.w_q.T, self.w_uk, self.cos, self.sin, w.rope)
        o_lat = latent_attention(q_all, self.cache, w.rope, self.scale, self.splits)  # (batch, heads, latent)
        o = o_lat.new_empty(w.batch, w.heads * w.v_dim)
        torch.bmm(o_lat.transpose(0, 1), self.w_uv_t, out=o.view(w.batch, w.heads, w.v_dim).transpose(0, 1))
        return o @ self.w_o.T


def get_benchmark() -> aisp.Benchmark:
    return LeanFusedLatentMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
