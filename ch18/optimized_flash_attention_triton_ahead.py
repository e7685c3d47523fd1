"""Optimized flash attention, ahead variant: the pvwait kernel with each key tile's Q K^T issued one tile early.

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``flash_attention_ahead`` (ch18_attention_ahead.py), ``_pvwait``'s kernel and config
(128 x 64 tiles, 2 stages, 128 registers: two programs an SM, no wgmma serialized) with its key
loop reordered: tile j's softmax, acc += P_j V_j, then S_{j+1} = Q K_{j+1}^T. Triton's pipeliner
issues tile j+1's K copy at the end of iteration j; in ``_pvwait`` the next iteration waits for it
at once (the copy's latency exposed once a tile), here only after a softmax and a P V product.
Compiled for sm_90a without a GPU: 128 registers, no spills, no ptxas advisory, 325 SASS
instructions a key tile (``_pvwait`` 329), 3 bar.sync a tile (the same). One config, compiled at
the first call (untimed).
Expect: measured, H200, 2026-11-29 (two runs): 0.9890 and 0.9904 ms, 71.0% and 70.9% of the 783
TFLOP/s bf16 peak (~556 TFLOP/s), 16.2x and 16.4x over the baseline; ``_pvwait`` 1.1242 and 1.1248 ms
in the same runs (estimated 1.05-1.13 ms, 0-10% off ``_pvwait``: it gained 12%). cuDNN 0.92 ms.
Run: python ch18/optimized_flash_attention_triton_ahead.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

import torch
from ch18_attention_ahead import flash_attention_ahead
from optimized_flash_attention_triton import TritonFlashAttention

import aisp


class AheadFlashAttention(TritonFlashAttention):
    def run(self) -> torch.Tensor:
        return flash_attention_ahead(self.q, self.k, self.v, causal=True)


def get_benchmark() -> aisp.Benchmark:
    return AheadFlashAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
