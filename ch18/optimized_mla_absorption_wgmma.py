"""Optimized MLA decode, ``_graph``'s step with the latent attention on wgmma and a TMA copy a tile.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_graph.py's step (weight absorption, the query by one Triton
kernel, one split-KV pass over the latent cache, the merge, the ``W_UV`` bmm, the first five kernels
replayed as one CUDA graph) with ``_slice`` replaced by ``ch18_mla_wgmma._slice_t``. ``_slice`` (81 of
the 103 us of kernels a call; Nsight Compute: DRAM 75%, two programs of 4 warps an SM, top stalls
short_scoreboard and wait) multiplies with the 16 heads as the rows of mma.sync tiles, so each of
its warps re-reads the (16, 576) query from shared memory every 32-key tile (72 KB against the
tile's 36 KB) and chains 36 dependent MMAs for the scores; its 2-buffer pipeline keeps ~36 KB in
flight a program. ``_slice_t`` transposes the scores' product (keys as the wgmma's 64 rows, heads as
its 16 columns): the tensor cores read the query once a warpgroup, the chain is one wgmma group, and
each 64-key tile's 512 latent columns arrive by one 64 KB TMA copy (RoPE columns by plain loads
one tile ahead); 92 KB of shared memory and 184 registers (sm_90 compile): two programs an SM,
up to 2 x 64 KB in flight. Same bytes (the cache once, 8 slices' fp32 partials), same merge.
Expect: measured, H200, 2026-11-29: 0.1059 and 0.1072 ms (53.1x and 52.7x) against ``_graph``'s
0.1099 in the same run: 3-4% faster, 72% of its memory ceiling (the estimate had said 71-75%). Kernel
and merge alone (do_bench, GPU test): 90.9 us against ``_slice``'s 92.8 (3.32 TB/s): the DRAM
stream, not the query's shared-memory traffic, bounds both.
Run: python ch18/optimized_mla_absorption_wgmma.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_wgmma import TOKENS, TokenConfig, latent_attention_t
from optimized_mla_absorption_graph import GraphedLeanMLA

import aisp

SPLITS = 8
"""Context slices per sequence: 32 x 8 = 256 programs, one wave at two an SM (264 slots)."""


class WgmmaGraphedMLA(GraphedLeanMLA):
    splits = SPLITS
    slice_config = TOKENS
    """``_slice_t``'s settings; ``python ch18/kernel_sweep.py mla_wgmma`` times others."""

    def setup(self) -> None:
        if self.device.type == "cuda" and torch.cuda.get_device_capability(self.device) < (9, 0):
            raise aisp.Unavailable("the wgmma latent kernel copies by TMA: it needs compute capability 9.0")
        super().setup()

    def attend(self, q_all: torch.Tensor) -> torch.Tensor:
        if not isinstance(self.slice_config, TokenConfig):  # kernel_sweep's control row: _slice's own setting
            return super().attend(q_all)
        return latent_attention_t(q_all, self.cache, self.workload.rope, self.scale, self.splits, self.slice_config)


def get_benchmark() -> aisp.Benchmark:
    return WgmmaGraphedMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
