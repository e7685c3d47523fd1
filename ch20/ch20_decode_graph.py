"""A decode step captured in a CUDA graph, for the ``llm_inference_e2e`` stages: replayed per step
by static batches (s2, s3) and by a continuous batcher (s4).

A minimal version of what chapter 16 builds (a chapter may not import another chapter): static
token/position buffers in, greedy token and top-4 logits out, the KV cache at a fixed address,
attention over all of its slots (a fixed shape).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from aisp.kits.llm import (
    TOP,
    ContinuousBatcher,
    DenseKVCache,
    Generated,
    Request,
    decode,
    finish,
    greedy_top,
    prefill,
)
from aisp.kits.llm.engine import on_device


class GraphedDecode:
    """One greedy decode step of ``cache``'s rows over static buffers, captured in a CUDA graph (a
    direct call on a CPU): ``tok``/``pos`` (rows,) in, ``next_tok``/``top`` out; the step attends to
    all ``cache_len`` slots (a fixed shape; slots after a row's position are masked) and feeds its
    token back (``tok`` <- next, ``pos`` += 1). Warm-up and capture write at the last slot, which a
    real step always writes before any query sees it."""

    def __init__(self, model: torch.nn.Module, cache: DenseKVCache, rows: int, cache_len: int) -> None:
        device = cache.k.device
        self.model, self.cache, self.cache_len = model, cache, cache_len
        self.tok, self.pos, self.next_tok = (torch.zeros(rows, dtype=torch.long, device=device) for _ in range(3))
        self.top = torch.zeros(rows, TOP, device=device)
        self.graph = capture(self._step, self._prime, device)

    def _prime(self) -> None:
        self.tok.zero_()
        self.pos.fill_(self.cache_len - 1)

    def _step(self) -> None:
        token, top = greedy_top(decode(self.model, self.cache, self.tok, self.pos, self.cache_len), TOP)
        self.next_tok.copy_(token)
        self.top.copy_(top)
        self.tok.copy_(token)
        self.pos.add_(1)

    def __call__(self) -> None:
        self.graph.replay() if self.graph is not None else self._step()


def capture(fn: Callable[[], None], prime: Callable[[], None], device: torch.device) -> torch.cuda.CUDAGraph | None:
    """``fn`` warmed up on a side stream and captured (None on a CPU: called directly)."""
    if device.type != "cuda":
        return None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            prime()
            fn()
    torch.cuda.current_stream().wait_stream(side)
    prime()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        fn()
    return graph


def graphed_static(model: torch.nn.Module, step: GraphedDecode, requests: list[Request], batch: int) -> Generated:
    """The kit's ``static_generate`` with each decode step a graph replay: prefill the padded batch
    (eager), then replay until the batch's longest output is done."""
    device = step.tok.device
    out = Generated.empty(requests, device)
    for start in range(0, len(requests), batch):
        group = requests[start:start + batch]
        first = greedy_top(prefill(model, step.cache, [r.prompt for r in group]), TOP)
        step.tok.zero_()
        step.pos.zero_()  # rows this batch leaves empty step at position 0 of their own cache row
        step.tok[:len(group)] = first[0]
        step.pos[:len(group)] = on_device([len(r.prompt) for r in group], device)
        steps = [first]
        for _ in range(max(r.output_len for r in group) - 1):
            step()
            steps.append((step.next_tok[:len(group)].clone(), step.top[:len(group)].clone()))
        finish(out, group, steps)
    return out


class GraphedBatcher(ContinuousBatcher):
    """The kit's continuous batcher with its decode forward replaced by a replay of ``step``; the
    host bookkeeping after the step is the kit's. Admissions wait until ``min_admit`` slots are free
    (or nothing runs, or fewer requests wait): one prefill forward then serves several arrivals."""

    def __init__(self, model: torch.nn.Module, step: GraphedDecode, slots: int, min_admit: int = 1) -> None:
        super().__init__(model, step.cache, slots)
        self.graphed, self.min_admit = step, min_admit

    def _admit(self, waiting: list[Request], out: Generated) -> list[Request]:
        free = sum(h is None for h in self.held)
        if waiting and free < min(self.min_admit, len(waiting)) and any(h is not None for h in self.held):
            return waiting
        return super()._admit(waiting, out)

    def _step(self, out: Generated) -> None:
        g = self.graphed
        g.tok.copy_(self.tok)
        g.pos.copy_(self.pos)
        g()
        self.tok = g.next_tok.clone()
        self.buf[self.all_rows, self.col], self.buf_top[self.all_rows, self.col] = self.tok, g.top
        self.pos += self.active
        self.col += self.active
        self._notify([r.rid for r in self.held if r is not None])
        for s in range(self.slots):
            if self.held[s] is not None:
                self.left[s] -= 1
                self.length[s] += 1
                if self.left[s] == 0:
                    self._release(s, out)
