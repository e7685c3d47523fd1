"""What chapter 18's CUDA-graph pair shares: a decode step of the serving kit's decoder over static
buffers, captured for one batch size into a shared memory pool.

Padding rows (a bucket's rows past the live ones) decode at the cache's last slot, ``kv_len - 1``:
every live query's position is below it, so the causal mask hides what they write there.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from aisp.kits.llm import TOP, DenseKVCache, decode, greedy_top

STEP_KERNELS = 242
"""Kernels in one ``StepGraph`` step of the chapter's 8-block decoder (8 x 26, plus 34 for the
embedding, head, top-k and two output copies): the non-view aten ops it dispatches, counted on a CPU
in fp32 (tests/test_latency_ceilings.py recounts them); an upper bound: on an H200 a step ran 183."""
STEP_KERNELS_H200 = 183
"""Kernels one step launched on an H200 (torch profiler trace of ch18:cudagraph_bucketing, 2026-11-29:
2,196 launch calls for 12 eager steps, the warm-ups and captures): the nodes a step's graph holds there."""


class StepGraph:
    """A decode step of ``size`` rows over static buffers (``tok``, ``pos`` in; ``next_tok``, ``top``
    out) captured in a CUDA graph into ``pool``; on a CPU called directly (the same logic)."""

    def __init__(self, model: torch.nn.Module, cache: DenseKVCache, size: int, kv_len: int, pool: tuple | None) -> None:
        device = cache.k.device
        self.model, self.cache, self.size, self.kv_len = model, cache, size, kv_len
        self.tok = torch.zeros(size, dtype=torch.long, device=device)
        self.pos = torch.full((size,), kv_len - 1, dtype=torch.long, device=device)  # warm-up writes the trash slot
        self.next_tok = torch.zeros(size, dtype=torch.long, device=device)
        self.top = torch.zeros(size, TOP, device=device)
        self.graph = capture(self._step, pool) if device.type == "cuda" else None

    def _step(self) -> None:
        token, top = greedy_top(decode(self.model, self.cache, self.tok, self.pos, self.kv_len), TOP)
        self.next_tok.copy_(token)
        self.top.copy_(top)

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self._step()


def capture(fn: Callable[[], None], pool: tuple) -> torch.cuda.CUDAGraph:
    """``fn`` warmed up once, then captured on a side stream (``torch.cuda.graph`` minus its sync,
    gc.collect and empty_cache)."""
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        fn()
        graph.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    return graph
