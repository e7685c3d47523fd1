"""Baseline TP decode (2 GPUs): the whole decoder on one GPU, eager greedy decode of a batch of 8.

Baseline: a wide decoder (2 blocks of a 70B-class layer: width 8192, 64 query heads on 8 K/V heads,
SwiGLU 28,672; 32k vocabulary; 2.24B parameters, bf16) decodes 16 greedy tokens for 8 sequences
whose 512-token prompts were prefilled at setup (each call rewrites positions 512..527). Every step
reads 3.95 GB of weights (blocks 3.42 GB, LM head 0.52 GB) and ~34 MB of cache. The steps run
eagerly with the chapter's tensor-parallel code at one shard (``ch16_tp.Shard(0, 1)``: the whole
decoder, no collective; bit-identical to the kit's ``decode``). The harness starts two ranks; rank 1
runs the same replica on its own GPU instead of idling: its GPU time equals rank 0's (separate GPUs,
same work), so the slowest-rank sample is the one-GPU latency; both ranks then hold the tokens to
verify against with no collective in the baseline, and both variants have two host processes
launching kernels, as tensor parallelism needs. The second GPU's work is redundant here: a server
would give it another batch (a data-parallel replica, twice the throughput at this latency).
Optimized (optimized_tp_decode_multigpu.py): 2-way tensor parallelism over NCCL, eager: each GPU
holds half the heads and half the SwiGLU width (1.71 GB of blocks + the 0.52 GB replicated head)
and all-reduces the attention and MLP outputs (2 per block, 8 x 8192 bf16 = 128 KB each).
Expect (measured, 2 x H200, 2026-11-26): SLOWER, 0.79x [0.76, 0.82]: 44.74 ms (one GPU, the slowest
replica) vs 56.59 ms 2-way TP for 16 eager decode steps, 2.8 -> 3.5 ms per step. The eager step is
launch-bound: each GPU's weight bytes halve (3.95 -> 2.24 GB per step; peak memory 4.51 -> 2.78 GB
per GPU), but that does not show while the host launches set the step's time, and the 4 all-reduces
per step add their latency. The two replica ranks took 26.18 and 44.74 ms (the harness times the
slowest; the gap is not yet explained). Estimated 1.0-1.2x eager, possibly below 1: the one-GPU step
needs 1.3-2.0 ms for its bytes at 2-3 TB/s, while an eager step costs host time per block plus the
head (decode_cuda_graph's eager step of 8 narrower blocks, measured, H200, 2026-11-26: at most ~3.5
ms). Next: capture the sharded step, all-reduces included, in a CUDA graph (estimated 1.5-1.7x; a
first graphed variant produced no output within 120 s on 2 x H200, in capture or teardown, not
diagnosed, and was reverted). The first run of this pair did not finish in 150 s: each rank drew the
weights on one CPU thread (torchrun sets OMP_NUM_THREADS=1); they are now drawn on the GPU
(``build_decoder(..., draw_on_device=True)``).
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin, ~90 logits at this width);
top-4 logits per step at the bf16 defaults (each rank rounds its partial sums to bf16 before they are
added).
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

import torch
from ch16_decode import DecodeWorkload, dtype_on, weight_bytes
from ch16_tp import Shard, ShardedDecoder, shard_cache

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from aisp.kits.multirank import world_and_rank

WIDE = LLMConfig(vocab=32000, dim=8192, layers=2, heads=64, kv_heads=8, ffn=28672)


def rank_bytes(w: DecodeWorkload, shards: int) -> float:
    """Bytes one rank reads in a call: its share of the block weights and the cache, the whole head."""
    head = 2.0 * w.model.vocab * w.model.dim
    weights = (weight_bytes(w.model) - head) / shards + head
    kv = w.step_bytes() - (w.steps - 1) * weight_bytes(w.model)
    return (w.steps - 1) * weights + kv / shards


def tp_workload(w: DecodeWorkload, requires: aisp.Requirements, precision: str = "bf16") -> DecodeWorkload:
    """``w`` with the accounting of one rank of the 2-way variant (its GB/s is its share of one HBM)."""
    return DecodeWorkload(model=w.model, batch=w.batch, prompt=w.prompt, steps=w.steps, flops=w.step_flops() / 2,
                          bytes=rank_bytes(w, 2), items=w.batch * (w.steps - 1), item_unit="tokens",
                          precision=precision, requires=requires, timeout_s=600)


WORKLOAD = tp_workload(DecodeWorkload(model=WIDE, batch=8, prompt=512, steps=17), aisp.Requirements(gpus=2))


class ReplicaDecode(aisp.Benchmark):
    """``steps - 1`` eager greedy decode steps from the prefilled cache, starting at each row's
    ``first`` token, with the decoder split over ``shards`` ranks; returns (tokens, top logits)."""

    workload: DecodeWorkload = WORKLOAD
    inputs = ("first",)
    state = ("cache_k", "cache_v")
    shards = 1

    def shard(self) -> Shard:
        world, rank = world_and_rank()
        if self.shards > 1 and world != self.shards:
            raise RuntimeError(f"{self.shards}-way tensor parallelism needs {self.shards} ranks; this world has {world}")
        return Shard(rank if self.shards > 1 else 0, self.shards)

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
        self.model, self.cache = ShardedDecoder(full, shard), shard_cache(cache, w.model, shard)
        self.cache_k, self.cache_v = self.cache.k, self.cache.v

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, tok = self.workload, self.first
        tokens, tops = [], []
        positions = torch.full((w.batch,), w.prompt, device=self.device)
        for t in range(w.steps - 1):
            step = self.cache.bind(positions[:, None], w.prompt + t + 1)
            tok, top = greedy_top(self.model(tok[:, None], positions[:, None], step)[:, 0], TOP)
            tokens.append(tok)
            tops.append(top)
            positions = positions + 1
        return torch.stack(tokens, 1), torch.stack(tops, 1)


def get_benchmark() -> aisp.Benchmark:
    return ReplicaDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
