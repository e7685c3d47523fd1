"""Optimized score_mod, autotuned: Inductor times the FlexAttention kernel's tile configs.

Baseline (baseline_flex_score_mod.py): SDPA over all S^2 scores with a 512 MiB bias tensor.
Optimized: optimized_flex_score_mod.py's ALiBi ``score_mod`` and causal BlockMask (the class is
reused), with ``flex_attention`` compiled by ``torch.compile(..., dynamic=False,
mode="max-autotune-no-cudagraphs")`` in setup (untimed) instead of the default mode. The default
mode compiles one config, on Hopper for bf16 and head dim 64 (BLOCK_M, BLOCK_N, stages, warps) =
(128, 128, 3, 4): the profiled kernel, 255 registers, 2 warps a scheduler, tensor pipe 28%, issue
46%. Max-autotune (torch/_inductor/template_heuristics/triton.py, CUDAConfigHeuristic) compiles and
times six: (128, 64, 3, 4), (128, 128, 3, 4) (the default), (128, 128, 2, 8), (128, 128, 1, 8),
(64, 128, 3, 4), (64, 64, 3, 4); all divide the 128-token BlockMask tiles, and the fastest is kept.
Inductor times them on a stand-in BlockMask (every key tile listed), not on the causal one.
kernel_options, both true of this causal mask (tested): ROWS_GUARANTEED_SAFE (the kernel visits a
query tile's one partial key tile, the diagonal, first, and every row sees that tile's first key,
so no row is all -inf after the first step: the per-step masked-row check goes), and
BLOCKS_ARE_CONTIGUOUS (the full tiles are 0..i-1 in order: the kernel steps to the next tile
without loading its index). Both trim per-step instructions of an issue-bound kernel; neither
changes the answer. Not USE_TMA: 13% slower here (README, kernel options tried). Compile: six Triton kernels compiled in parallel and timed, estimated 15-45 s
in the first setup, reported as ``compile_s`` (the parent: 4.9 s), inside the pair's 600 s
timeout_s (unchanged). On a CPU: the parent's default torch.compile, no kernel_options.
Expect: measured, H200, 2026-11-29 (estimated 0-10% below the parent's 0.52 ms): 0.493 ms against
the parent's 0.521 (5.4% less), 2.08x [2.06, 2.10]; 35.6% of the bf16 peak against 33.7%. The
pair's setup (compile and autotune) took 23 s.
Run: python ch14/optimized_flex_score_mod_autotuned.py  |  aisp bench run -t ch14:flex_score_mod
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from optimized_flex_score_mod import FlexScoreMod
from torch.nn.attention.flex_attention import FlexKernelOptions

import aisp
from aisp.kits.attention import autotuned_flex

CAUSAL_OPTIONS: FlexKernelOptions = {"ROWS_GUARANTEED_SAFE": True, "BLOCKS_ARE_CONTIGUOUS": True}
"""True of the causal BlockMask (test_ch14_pairs.py checks both on it)."""


class AutotunedFlexScoreMod(FlexScoreMod):
    compile_key = "flex_attention_max_autotune"

    def compile(self) -> Callable[..., torch.Tensor]:
        if self.device.type != "cuda":
            return super().compile()
        self.attend = partial(autotuned_flex(), kernel_options=CAUSAL_OPTIONS)
        self.run()
        return self.attend


def get_benchmark() -> aisp.Benchmark:
    return AutotunedFlexScoreMod()


if __name__ == "__main__":
    aisp.main(get_benchmark)
