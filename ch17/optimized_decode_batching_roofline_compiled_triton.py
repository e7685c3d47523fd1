"""Optimized decode batching, compiled and in a CUDA graph, with its attention and top-k as Triton
kernels: ``_compiled``'s step, where the library kernels outside the GEMMs were a quarter of it.

Baseline (baseline_decode_batching_roofline.py): 64 batch-1 forwards, each reading all 3.95 GB of
weights for one token (~1 FLOP/byte: HBM-bound, tensor cores idle).
Optimized: ``_compiled``'s step (one forward over the 64 requests, Inductor-fused, in a CUDA graph)
with two registered Triton ops (ch17_decode.py). Profiled on an H200 (2026-11-29) ``_compiled`` runs
1.322 ms of kernels a call: GEMMs ~1.01 ms (3.95 GB, ~3.9 TB/s), cuDNN attention 132 us, top-k,
index_put and fused small kernels ~0.18 ms. (1) Attention: the cache holds 64 rows x 8 K/V heads
x 513 slots x 128 x 2 B = 67 MB of K and as much of V a layer, 269 MB for two layers: 64 us at
4.2 TB/s, 77 us at 3.5; cuDNN took 132 us (2.0 TB/s). ``ch17::decode_attend`` is one kernel a
layer: a program per (request, K/V head), 512, its 8 query heads one tile against 64-key tiles,
4 tiles in flight; it reads slots below the request's position, takes the new key and value
from registers and stores them in the cache (the two ``index_put_`` kernels a layer go, and the
additive mask, which nothing reads, is dropped by Inductor). 512 programs over 16 K/V tiles each
ran at 93% of the copy rate in ch18:split_kv_decode (Nsight Compute, 2026-11-28); here 8 tiles,
two rounds of 264 programs, so more ramp: no split of the keys (a merge would cost a launch a layer).
(2) Top-k: ``_compiled``'s two ``torch.topk`` rounds run one radix-select block per 250-logit
slice (8,192 blocks, ~8 passes each) and a sorted round; ``ch17::top_logits`` takes the top 4 of
each 1,024-logit chunk (4 max-and-drop rounds in registers, 2,048 programs), then of the 128
candidates a row: two kernels over the 4.1 MB of logits.
Expect: measured, H200, 2026-11-29: 170.5 -> 1.138 ms (143x; that run's baseline was noisy, CI [104,
197]), then 82.7 -> 1.164 ms, 71.1x [67.1, 75.3]: 4.22 GB at 3.62-3.70 TB/s, 86-88% of HBM (``_compiled``
1.338 ms, 75%; estimated 1.24-1.28 ms).
Run: python ch17/optimized_decode_batching_roofline_compiled_triton.py  |  aisp bench run -t ch17:decode_batching_roofline
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from ch17_decode import decode_attend, top_logits
from optimized_decode_batching_roofline_compiled import CompiledTogether, InPlaceKV, InPlaceStep

import aisp
from aisp.kits.llm import TOP
from aisp.kits.llm.model import Attention


class DecodeStep(InPlaceStep):
    """``InPlaceStep`` that also keeps the step's positions and caches for ``decode_attend``."""

    def __init__(self, cache: InPlaceKV, positions: torch.Tensor, *args: object) -> None:
        super().__init__(cache, positions, *args)
        self.positions = positions


class DecodeKV(InPlaceKV):
    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None, fresh: bool = False,
             tail: bool = False) -> DecodeStep:
        return DecodeStep(self, positions, kv_len, rows, fresh, tail)


class DecodeAttention(Attention):
    """The kit's attention; a decode step (one token a row) over a ``DecodeStep`` of the cache's first
    rows writes and attends in one ``ch17::decode_attend``."""

    def _attend(self, heads: torch.Tensor, seg: object, layer: int) -> torch.Tensor:
        step, cfg = seg.cache, self.cfg
        if not isinstance(step, DecodeStep) or step.rows is not None or step.fresh or heads.shape[1] != 1:
            return super()._attend(heads, seg, layer)
        q, k, v = heads[:, 0].split([cfg.heads, cfg.kv_heads, cfg.kv_heads], dim=1)
        return decode_attend(*step.caches, layer, step.positions, q, k, v)


class TritonCompiledTogether(CompiledTogether):
    def step_fn(self) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
        for block in self.model.blocks:  # the same module and weights, its decode attention replaced
            block.attn.__class__ = DecodeAttention
        self.cache = DecodeKV(self.cache)
        return torch.compile(self.batched_step, dynamic=False)

    def batched_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``Together.run``: one forward over every request (their cache rows in place), its top-4."""
        step = self.cache.bind(self.positions, self.workload.context + 1)
        return top_logits(self.model(self.tokens[:, None], self.positions, step)[:, 0], TOP)


def get_benchmark() -> aisp.Benchmark:
    return TritonCompiledTogether()


if __name__ == "__main__":
    aisp.main(get_benchmark)
