"""Optimized MLA decode, fused variant: weight absorption with ONE Triton kernel over the latent cache.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: the absorbed step of optimized_mla_absorption.py (W_UK folded into the query, W_UV into
the output, all 16 heads attending to the cache as stored), with its attention, two bmms over the
cache and a softmax between them (Nsight Compute, H200, 2026-11-28: the bmms 77 + 67 us at 84-87%
of DRAM, the cache read twice, plus the (32, 16, 8192) scores' round trip), replaced by
``latent_attention`` (ch18_mla_kernel.py), FlashMLA-style split-KV decoding: a program takes one
sequence's 16 heads (the 16 rows of one tensor-core tile) and a 512-token slice of its cache
(32 x 16 = 512 programs); each 32 x 576 cache tile is loaded once and used twice, for the scores
(latent and RoPE columns) and, after an online softmax in fp32, for P @ c_kv (its latent columns).
A merge kernel combines the 16 slices' (max, sum, acc) partials (17 MB of fp32 each way). HBM
bytes: the cache once (302 MB: ~72 us at ~4.2 TB/s) instead of twice; no scores in HBM; 2 launches
where the bmm form takes ~6 (two bmms, the fp32 cast and scale, the softmax, the bf16 cast).
Expect (measured, H200, 2026-11-29): 5.640 -> 0.144 ms, 39.08x [38.97, 39.20], 53.8% of HBM (2.27 TB/s; the
two-bmm variant 0.2492 ms, 31.1%); estimated 0.15-0.18 ms, ~32-38x, 45-55%. tests/test_ch18_gpu.py (fused_latent)
timed the attention alone: the two bmms + softmax 206.2 us (1.46 TB/s on the cache), this kernel at 4/8/16/32
slices 127.5/92.9/100.9/114.1 us (2.37/3.25/2.99/2.65 TB/s; the pair uses 16, 8 was faster there): ~43 us of
the call is outside the kernel (projections, merge, launches). Profiled (H200, 2026-11-29, aisp profile diff): the
kernel (``_slice``) 86.9 us at 75% of DRAM (3.62 TB/s), two programs of 4 warps an SM (93 KB of shared memory
each), top stalls short_scoreboard and wait; the torch trace of that run: 13 kernels a call, 128 us, the other
12 (query absorption, cat, merge, output projection) 41 us.
Run: python ch18/optimized_mla_absorption_fused.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import os

import torch
from ch18_mla_kernel import latent_attention
from optimized_mla_absorption import AbsorbedMLA

import aisp


class FusedLatentMLA(AbsorbedMLA):
    splits = 16
    """Context slices per sequence: 32 x 16 = 512 programs, ~4 per H200 SM."""

    def setup(self) -> None:
        if self.device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise aisp.Unavailable("the fused latent kernel is Triton: it needs a CUDA GPU (or TRITON_INTERPRET=1)")
        super().setup()

    def attend(self, q_all: torch.Tensor) -> torch.Tensor:
        return latent_attention(q_all, self.cache, self.workload.rope, self.scale, self.splits)


def get_benchmark() -> aisp.Benchmark:
    return FusedLatentMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
