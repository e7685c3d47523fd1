"""Optimized MLA decode, ``_wgmma``'s step with its last three kernels (merge, ``W_UV``, output projection) as ONE launch.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_wgmma.py's step (weight absorption, the query by one Triton kernel,
one split-KV wgmma pass over the latent cache, the first kernels replayed as one CUDA graph) up to the
latent kernel's fp32 partials; then ``ch18_mla_tail.mla_tail`` in place of the three kernels that
followed it, each waiting for the one before: ``_merge`` (3.0 us in ``_fused_qo``'s torch trace), the
``W_UV`` bmm and cuBLAS's output projection (4.8 and 6.8 us in ``_wgmma``'s Nsight Compute profile, at
11-35% of DRAM: latency, not bytes; 10.4 MB of weights are ~2.5 us at 4.2 TB/s). One launch, two
roles by ticket: 128 merger programs (a head, 4 sequences: the 8 slices' partials weighed on the way
into ``W_UV``'s product; 64 KB of partials and 128 KB of ``W_UV`` each) write the (32, 2,048) ``o``;
128 projector programs (16 output columns each) spin until the mergers are done, then ``o @ W_O^T``.
The cache is read once, as before; the partials and ``o`` stay in L2. Same rounding points (o_lat and
o in bf16, fp32 sums). The launch is eager after the graph's replay, as ``_wgmma``'s projection was.
Estimate (arithmetic, an estimate): of the stored 0.1075 ms, the three kernels and their two
boundaries are ~15-17 us; one launch of two ~2-3 us phases is ~5-6 us: ~10 us off, 0.096-0.099 ms,
78-81% of the 0.0775 ms ceiling. The latent kernel (78.5 us) and the query side are unchanged.
Expect: not yet measured on a GPU (checked on a CPU: the tail matches fp64 under the interpreter, the
pair verifies there, and the kernel compiles for sm_90 to mma.sync without spills).
Run: python ch18/optimized_mla_absorption_tail.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_query import absorbed_query
from ch18_mla_tail import TAIL, mla_tail, new_sync
from ch18_mla_wgmma import latent_partials_t
from optimized_mla_absorption_wgmma import WgmmaGraphedMLA

import aisp


class TailMLA(WgmmaGraphedMLA):
    scratch = ("front_out", "o_heads")
    state = ("sync",)
    """The tail's counters: each launch leaves them at zero, so they are never poisoned."""
    tail_config = TAIL

    def prepare(self) -> None:
        w = self.workload
        self.o_heads = self.w_o.new_empty(w.batch, w.heads * w.v_dim)  # the mergers' output, the projectors' input
        self.sync = new_sync(self.device)
        super().prepare()

    def _capture_front(self) -> None:
        self.front_out = self.partials()

    def partials(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The step up to the latent kernel: its slices' fp32 partials (acc; max and sum)."""
        w = self.workload
        q_all = absorbed_query(self.x @ self.w_q.T, self.w_uk, self.cos, self.sin, w.rope)
        return latent_partials_t(q_all, self.cache, w.rope, self.scale, self.splits, self.slice_config)

    def run(self) -> torch.Tensor:
        if self.graph is None:
            parts, ml = self.partials()
        else:
            self.graph.replay()
            parts, ml = self.front_out
        return mla_tail(parts, ml, self.w_uv_t, self.w_o, self.o_heads, self.sync, self.splits, self.tail_config)


def get_benchmark() -> aisp.Benchmark:
    return TailMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
