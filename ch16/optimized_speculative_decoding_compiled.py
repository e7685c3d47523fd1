"""Optimized speculative decoding, compiled round and batched syncs: the same draft-and-verify
round as optimized_speculative_decoding.py, its kernels fused by Inductor before the graph captures
them, and up to 10 rounds queued per host sync.

Baseline (baseline_speculative_decoding.py): 47 graphed target steps, one token each, each reading
the target's 5.9 GB of weights (memory-bound).
Optimized: ``SpecRound`` as in optimized_speculative_decoding.py (the draft proposes 4 tokens, the
target verifies 5 positions, exactly its greedy tokens kept), with two changes:
1. The round's Python is traced once by ``torch.compile`` (Inductor, no autotuning, its own CUDA
   graphs off: ``StepGraph`` captures the compiled kernels). Per block, RMSNorm (2 passes), RoPE
   (~8 small ops), the SwiGLU product, the residual adds, the mask and slot arithmetic become a few
   fused Triton kernels; the GEMMs and SDPA stay cuBLAS / the memory-efficient kernel.
2. The round also writes its 5 tokens and top logits into position-indexed output buffers on the
   GPU, so the host need not read ``agree`` after every round: a round yields at most 5 tokens, so
   ``ceil(remaining / 5)`` rounds are all needed whatever they accept; they are queued back to back
   (10, then ~3, 1, 1 at the draft's 0.64 acceptance: ~4 syncs instead of 15), and one read of the
   position says how many tokens are made. No extra round runs: the work is the same 15 rounds.
Tokens exactly as before; the top logits differ from the eager round's by the fused kernels'
rounding (fp32 inside a fused norm instead of bf16 between ops), within the bf16 defaults.
Expect (measured, H200, 2026-11-29, two runs of 20 samples): 56.45 / 56.62 ms against the
eager rounds' 63.68 / 64.94 in the same runs (1.13-1.15x), 35% of the speculative-bytes ceiling
(estimated 50-56 ms). 80% is out of reach at this draft: 15 rounds of its bytes (126 GB) take 30 ms
at the HBM rate plus the ~5 ms compute-bound prefill, 57% of the 84.3 GB ceiling at best. Inductor
compiles the round in setup (one-time).
Run: python ch16/optimized_speculative_decoding_compiled.py  |  aisp bench run -t ch16:speculative_decoding
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from optimized_speculative_decoding import SpecRound, Speculative

import aisp
from aisp.kits.llm import TOP, Decoder, DenseKVCache


class CompiledRound(SpecRound):
    """``SpecRound`` whose round also writes ``out_tok[p]`` / ``out_top[p]``, the token at position
    ``p`` and its top logits, for the 5 positions after ``pos``; slots past ``kv_len`` (only the
    warm-up's) land, clamped, in a spare last slot. ``backends``: the ``torch.compile`` backend on
    a GPU and on a CPU (None: eager; the pair's CPU check runs eager, a test compiles)."""

    backends: dict[str, str | None] = {"cuda": "inductor", "cpu": None}  # noqa: RUF012 (read-only)

    def __init__(self, target: Decoder, draft: Decoder, cache: DenseKVCache, draft_cache: DenseKVCache,
                 propose: int, kv_len: int) -> None:
        device = cache.k.device
        self.out_tok = torch.zeros(kv_len + 1, dtype=torch.long, device=device)
        self.out_top = torch.zeros(kv_len + 1, TOP, device=device)
        # The draft's blocks are the target's first: its layer i is the cache's layer i, so the draft
        # takes the cache itself, not a view of its first layers: no aliased inputs for the compiler.
        super().__init__(target, draft, cache, cache, propose, kv_len)

    def body(self) -> Callable[[], None]:
        backend = self.backends.get(self.pos.device.type)
        return self._round_out if backend is None else torch.compile(self._round_out, backend=backend, dynamic=False)

    def _round_out(self) -> None:
        at = (self.pos + 1 + self.offsets).clamp_(max=self.kv_len)  # before _round advances pos
        self._round()
        self.out_tok.index_copy_(0, at, self.mine)
        self.out_top.index_copy_(0, at, self.top)


class BatchedSpeculative(Speculative):
    round_class = CompiledRound

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, rnd = self.workload, self.round
        first, first_top = self.first_token()
        rnd.out_tok[w.prompt:w.prompt + 1].copy_(first)
        rnd.out_top[w.prompt:w.prompt + 1].copy_(first_top)
        rnd.tok.copy_(first)
        rnd.pos.fill_(w.prompt)
        made, rounds = 1, 0
        while made < w.steps:
            queued = -(-(w.steps - made) // (w.propose + 1))  # each needed: a round makes <= k + 1
            for _ in range(queued):
                rnd.step()
            rounds += queued
            made = int(rnd.pos) - w.prompt + 1  # the batch's one host sync
        self.rounds, self.accepted, self.proposed = rounds, made - 1 - rounds, rounds * w.propose
        end = w.prompt + w.steps
        return rnd.out_tok[None, w.prompt:end].clone(), rnd.out_top[None, w.prompt:end].clone()


def get_benchmark() -> aisp.Benchmark:
    return BatchedSpeculative()


if __name__ == "__main__":
    aisp.main(get_benchmark)
