"""Baseline TP decode (2 GPUs): the whole decoder on one GPU, greedy decode of a batch of 8, each
step one CUDA-graph replay.

Baseline: a wide decoder (2 blocks of a 70B-class layer: width 8192, 64 query heads on 8 K/V heads,
SwiGLU 28,672; 32k vocabulary; 2.24B parameters, bf16) decodes 16 greedy tokens for 8 sequences
whose 512-token prompts were prefilled at setup (each call rewrites positions 512..527). Every step
reads 3.95 GB of weights (blocks 3.42 GB, LM head 0.52 GB) and ~34 MB of cache. The steps run the
chapter's tensor-parallel code at one shard (``ch16_tp.Shard(0, 1)``: the whole decoder, no
collective; bit-identical to the kit's ``decode``), each captured once in a CUDA graph
(``ch16_decode.GraphedDecode``), so host launches do not set the step's time. The harness starts
two ranks; rank 1 runs the same replica on its own GPU instead of idling: its GPU time equals rank
0's (separate GPUs, same work), so the slowest-rank sample is the one-GPU latency; both ranks then
hold the tokens to verify against with no collective in the baseline. The second GPU's work is
redundant here: a server would give it another batch (a data-parallel replica, twice the throughput
at this latency).
Optimized (optimized_tp_decode_multigpu.py): 2-way tensor parallelism, the graphed step holding its
4 all-reduces as one-shot symmetric-memory kernels: each GPU reads 2.24 GB per step.
Expect (measured, 2 x H200, 2026-11-26): 20.51 -> 15.06 ms, 1.36x [1.35, 1.37] (estimated 1.4-1.7x):
1.28 ms per step here, 3.95 GB at 3.08 TB/s (74% of HBM).
History (measured, 2 x H200, 2026-11-26): eager on both sides, 44.74 ms one GPU vs 56.59 ms 2-way TP
over NCCL, 0.79x [0.76, 0.82]; the two replica ranks took 26.18 and 44.74 ms (not explained).
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin, ~90 logits at this width);
top-4 logits per step at the bf16 defaults (each rank rounds its partial sums to bf16 before they are
added).
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

import torch
from ch16_decode import DecodeWorkload, GraphedDecode, dtype_on
from ch16_tp import Reduce, Shard, ShardedDecoder, nccl_reduce, shard_cache

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from aisp.kits.multirank import world_and_rank

WIDE = LLMConfig(vocab=32000, dim=8192, layers=2, heads=64, kv_heads=8, ffn=28672)


def tp_workload(w: DecodeWorkload, requires: aisp.Requirements, precision: str = "bf16") -> DecodeWorkload:
    """``w`` with the accounting of the whole decode, summed over the ranks: each weight and the cache
    read once a step (by the rank that holds it), the model's FLOPs once, held to 2 x one GPU's HBM and
    bf16 peaks. The optimized's replicated LM head and the baseline's replica are distance from it."""
    return DecodeWorkload(model=w.model, batch=w.batch, prompt=w.prompt, steps=w.steps, flops=w.step_flops(),
                          bytes=w.step_bytes(), items=w.batch * (w.steps - 1), item_unit="tokens",
                          precision=precision, requires=requires, timeout_s=600,
                          ceiling_note="profiled (torch, 2 x H200): _push's kernels 9.32 ms a step; GEMMs 8.12 (94% of HBM "
                                       "on the weights), norms 0.43, 7 others 0.77; 79.7-80.6% in runs")


WORKLOAD = tp_workload(DecodeWorkload(model=WIDE, batch=8, prompt=512, steps=17), aisp.Requirements(gpus=2))


class ReplicaDecode(aisp.Benchmark):
    """``steps - 1`` greedy decode steps from the prefilled cache, starting at each row's ``first``
    token, with the decoder split over ``shards`` ranks, each step one CUDA-graph replay
    (``GraphedDecode``; called directly on a CPU); returns (tokens, top logits)."""

    workload: DecodeWorkload = WORKLOAD
    inputs = ("first",)
    state = ("cache_k", "cache_v")
    shards = 1

    def shard(self) -> Shard:
        world, rank = world_and_rank()
        if self.shards > 1 and world != self.shards:
            raise RuntimeError(f"{self.shards}-way tensor parallelism needs {self.shards} ranks; this world has {world}")
        return Shard(rank if self.shards > 1 else 0, self.shards)

    def reducer(self, shard: Shard, dtype: torch.dtype) -> Reduce:
        return nccl_reduce

    def setup(self) -> None:
        w, dtype = self.workload, dtype_on(self.device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())  # this rank's GPU
        full = build_decoder(w.model, self.seed, self.device, dtype, draw_on_device=True)
        prompts = torch.randint(w.model.vocab, (w.batch, w.prompt), generator=self.generator(), device=self.device)
        cache = DenseKVCache(w.model, w.batch, w.prompt + w.steps, self.device, dtype)
        with torch.no_grad():
            self.first = greedy_top(prefill(full, cache, list(prompts)), TOP)[0]
        shard = self.shard()
        self.model = ShardedDecoder(full, shard, self.reducer(shard, dtype))
        self.cache = shard_cache(cache, w.model, shard)
        self.cache_k, self.cache_v = self.cache.k, self.cache.v
        self.step = self.make_step(shard)

    def make_step(self, shard: Shard) -> GraphedDecode:
        w = self.workload
        return GraphedDecode(self.model, self.cache, w.batch, w.prompt + w.steps)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, step = self.workload, self.step
        tokens = torch.empty(w.batch, w.steps - 1, dtype=torch.long, device=self.device)
        tops = torch.empty(w.batch, w.steps - 1, TOP, device=self.device)
        step.tok.copy_(self.first)
        step.pos.fill_(w.prompt)
        for t in range(w.steps - 1):
            step()
            tokens[:, t], tops[:, t] = step.next_tok, step.top
        return tokens, tops


def get_benchmark() -> aisp.Benchmark:
    return ReplicaDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
