"""Optimized MLA decode, ``_wgmma``'s step with the cache's head fetched into L2 during the query side.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_wgmma.py's graphed step (weight absorption, the query by one
Triton kernel, ``_slice_t`` over the latent cache by wgmma and TMA, the merge, the ``W_UV`` bmm, the
output projection). Its Nsight Compute profile (H200, 2026-11-29): ``_slice_t`` 78.5 us at 80.8% of
DRAM (3.89 TB/s, ~92% of the 4.2 TB/s copy rate), then cuBLAS's three small GEMMs 7.5 + 6.8 + 4.8 us
at 11-35% of DRAM, serial before and after it: the ~30 us outside the cache kernel is the gap to 80%.
Splitting the batch (GEMMs of one half beside the cache kernel of the other) does not shorten it: a
weight-bound GEMM of 16 rows reads the same weight as one of 32, so the first half's query side and
the last half's output side stay serial (and ``_skinny``'s split-K projection measured slower). So:
- the first 64 rows (one ``_slice_t`` tile) of every (sequence, slice), 18.9 MB, are prefetched into
  L2 (``ch18_mla_prefetch``: ``cp.async.bulk.prefetch.L2``, fire and forget) by a tiny kernel on a
  side branch of the graph that runs beside the query projection, while HBM is mostly idle; the
  latent kernel's first tiles then come from L2;
- ``_slice_t`` is a programmatic dependent launch (PDL) of ``_absorb`` (which triggers at its start):
  its 256 programs are launched and placed while ``_absorb`` runs and wait for it before the query;
  the merge is a dependent of ``_slice_t`` (triggered after its key loop): two launch gaps hidden.
Same inputs, kernels, bytes and output as ``_wgmma``: a prefetch is a hint, PDL only moves launches.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the prefetch moves 18.9 MB (~4.5 us
of HBM at 4.2 TB/s) under the ~10 us query side, ~2.5-4 us off ``_slice_t`` net of the projection's
contention; PDL ~1-2 us a launch edge; 0.106 -> ~0.099-0.102 ms, ~76-78% of HBM (80% is 0.097 ms).
``PREFETCH_ROWS`` 128 would move 37.7 MB (if the 60 MiB L2 keeps it beside 15 MB of weights: ~6-8 us).
Run: python ch18/optimized_mla_absorption_prefetch.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_kernel import split_length
from ch18_mla_prefetch import prefetch_slices
from ch18_mla_query import absorbed_query
from ch18_mla_wgmma import latent_attention_t
from optimized_mla_absorption_wgmma import WgmmaGraphedMLA

import aisp

PREFETCH_ROWS = 64
"""Cache rows a (sequence, slice) fetched into L2 before the latent kernel: 256 x 64 x 1,152 B = 18.9 MB."""


class PrefetchGraphedMLA(WgmmaGraphedMLA):
    prefetch_rows = PREFETCH_ROWS
    pdl = True
    """``_absorb`` -> ``_slice_t`` -> merge as programmatic dependent launches (on a CUDA GPU)."""

    def prepare(self) -> None:
        cuda = self.device.type == "cuda"
        self.side = torch.cuda.Stream(self.device) if cuda else None
        self.pdl = self.pdl and cuda
        super().prepare()  # captures the graph: the side branch below becomes a parallel branch of it

    def query(self) -> torch.Tensor:
        side, main = self.side, torch.cuda.current_stream() if self.side is not None else None
        if side is not None:  # a fork: the prefetch runs beside the projection, joined before _absorb
            side.wait_stream(main)
            with torch.cuda.stream(side):
                split_len = split_length(self.workload.context, self.splits, self.slice_config.block_n)
                prefetch_slices(self.cache, self.splits, split_len, self.prefetch_rows)
        q = self.x @ self.w_q.T
        if side is not None:
            main.wait_stream(side)  # so _slice_t's one incoming edge stays the programmatic one from _absorb
        return absorbed_query(q, self.w_uk, self.cos, self.sin, self.workload.rope, trigger=self.pdl)

    def attend(self, q_all: torch.Tensor) -> torch.Tensor:
        w = self.workload
        return latent_attention_t(q_all, self.cache, w.rope, self.scale, self.splits, self.slice_config, self.pdl)


def get_benchmark() -> aisp.Benchmark:
    return PrefetchGraphedMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
