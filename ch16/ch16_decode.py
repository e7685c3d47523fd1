"""What chapter 16's decode pairs share: the decoder's shape, the bytes a decode step must read, a
prefilled batch to decode from, and a decode step captured in a CUDA graph with static buffers.

The decoder is the serving kit's (:mod:`aisp.kits.llm`; chapter 15's size: 8 layers, width 1024,
16 query heads on 4 K/V heads, 156M parameters, bf16 on a GPU / fp32 on a CPU). Pairs return the
greedy tokens with each step's top logits: tokens must match exactly, logits within tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, decode, greedy_top

MODEL = LLMConfig(vocab=32000, dim=1024, layers=8, heads=16, kv_heads=4, ffn=2816)
STEP_KERNELS = 244
"""Kernels in one ``GraphedDecode`` step of MODEL (8 blocks x 26, plus 36 for the embedding, head,
top-k and the step's four output/feedback copies): the non-view aten ops it dispatches, counted on a
CPU in fp32 (tests/test_latency_ceilings.py recounts them); an upper bound: on an H200 a replay ran 184."""
STEP_KERNELS_H200 = 184
"""Kernels one replay of the ``GraphedDecode`` step graph ran on an H200 (torch profiler trace of
ch16:decode_cuda_graph, 2026-11-29: 5,704 kernels in 31 replays): fewer than STEP_KERNELS, as not every
aten op is a kernel there. The latency ceiling counts these, the nodes the graph holds on the GPU."""
PAGED_STEP_KERNELS = 294
"""Kernels in one ``GraphedDecode`` step of MODEL over a paged cache (the pages gathered per layer add
50), counted the same way (tests/test_latency_ceilings.py recounts them); not traced on a GPU, where the
dense step ran 184 of its 244 (STEP_KERNELS_H200), so ch16:async_scheduling's ceiling may count high."""
GPU_SIZED = aisp.Requirements(cuda=True)
"""Sized for an H100/H200; the logic runs on a CPU at small sizes in tests/test_ch16_pairs.py."""


def dtype_on(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def weight_bytes(cfg: LLMConfig, itemsize: float = 2.0) -> float:
    """Bytes of weights one decode step reads (the embedding only for its rows: excluded)."""
    return itemsize * (cfg.params() - cfg.vocab * cfg.dim)


@dataclass(frozen=True, kw_only=True)
class DecodeWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    """The decoder."""
    batch: int = 8
    """Sequences decoded together."""
    prompt: int = 512
    """Prompt tokens per sequence."""
    steps: int = 32
    """Tokens generated per sequence (the first from the prefill's logits)."""

    def step_bytes(self, weight_itemsize: float = 2.0, kv_itemsize: int = 2) -> float:
        """Weights plus the live KV cache, read by all decode steps of one call."""
        kv = sum(self.batch * (self.prompt + t) * self.model.kv_bytes_per_token(kv_itemsize)
                 for t in range(1, self.steps))
        return (self.steps - 1) * weight_bytes(self.model, weight_itemsize) + kv

    def step_flops(self) -> float:
        return sum(self.model.forward_flops(self.batch, self.prompt + t) for t in range(1, self.steps))


class StepGraph:
    """``fn()`` (reading and writing only static tensors) captured once in a CUDA graph and replayed,
    or called directly on a CPU (the same logic, for the tests). ``prime()`` resets the static
    inputs before each warm-up call and the capture."""

    def __init__(self, fn: Callable[[], None], prime: Callable[[], None], device: torch.device) -> None:
        self.fn, self.graph = fn, None
        if device.type == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm up: kernels picked and compiled before capture
                for _ in range(3):
                    prime()
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            prime()
            self.graph = torch.cuda.CUDAGraph()
            # thread_local: a process group's watchdog thread may query its events meanwhile
            with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
                fn()

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()


class GraphedDecode:
    """One greedy decode step of ``batch`` rows over ``cache`` with static buffers: ``tok`` and
    ``pos`` (batch,) in, ``next_tok`` (batch,) and ``top`` (batch, TOP) out. The step attends to
    all ``kv_len`` cache slots (a fixed shape; slots after a row's position are masked), then feeds
    its token back (``tok`` <- next token, ``pos`` += 1) so that replays chain with no copy in.
    Warm-up and capture write at position ``kv_len - 1`` (token 0): past every prompt, so no
    prefilled key is overwritten; a real step writes that slot before any query can see it."""

    def __init__(self, model: torch.nn.Module, cache: DenseKVCache, batch: int, kv_len: int) -> None:
        device = cache.k.device
        self.model, self.cache, self.kv_len = model, cache, kv_len
        self.tok = torch.zeros(batch, dtype=torch.long, device=device)
        self.pos = torch.zeros(batch, dtype=torch.long, device=device)
        self.next_tok = torch.zeros(batch, dtype=torch.long, device=device)
        self.top = torch.zeros(batch, TOP, device=device)
        self.step = StepGraph(self._step, self._prime, device)

    def _prime(self) -> None:
        self.tok.zero_()
        self.pos.fill_(self.kv_len - 1)

    def _step(self) -> None:
        token, top = greedy_top(decode(self.model, self.cache, self.tok, self.pos, self.kv_len), TOP)
        self.next_tok.copy_(token)
        self.top.copy_(top)
        self.tok.copy_(token)
        self.pos.add_(1)

    def __call__(self) -> None:
        self.step()

    def generate(self, first: torch.Tensor, first_top: torch.Tensor, start: int, steps: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """``first`` (the prefill's tokens at position ``start``) and ``steps - 1`` replays after it:
        tokens (batch, steps) and top logits (batch, steps, TOP)."""
        tokens = first.new_empty(first.shape[0], steps)
        top = torch.empty(first.shape[0], steps, first_top.shape[1], device=first.device)
        tokens[:, 0], top[:, 0] = first, first_top
        self.tok.copy_(first)
        self.pos.fill_(start)
        for t in range(1, steps):
            self()
            tokens[:, t], top[:, t] = self.next_tok, self.top
        return tokens, top
