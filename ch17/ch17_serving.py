"""What chapter 17's serving pairs share (on the kit :mod:`aisp.kits.llm`): the decoders they serve,
the bytes a decode step reads, and a clock of the gaps between decode steps.

``MODEL`` is chapter 15's decoder (8 layers, width 1024, 16 query heads on 4 K/V heads, 156M
parameters); ``WIDE`` two blocks of a 70B-class layer (width 8192, 64 query heads on 8 K/V heads,
SwiGLU 28,672; 2.24B parameters), whose batch-1 decode step is bound by reading its 3.95 GB of
weights, not by launches. bf16 on a GPU, fp32 on a CPU (the tests run tiny configurations).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext

import torch

import aisp
from aisp.kits.llm import LLMConfig

MODEL = LLMConfig(vocab=32000, dim=1024, layers=8, heads=16, kv_heads=4, ffn=2816)
WIDE = LLMConfig(vocab=32000, dim=8192, layers=2, heads=64, kv_heads=8, ffn=28672)
GPU_SIZED = aisp.Requirements(cuda=True)
"""Sized for an H100/H200; tests/test_ch17_pairs.py runs the same code at tiny sizes on a CPU."""


def dtype_on(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def weight_bytes(cfg: LLMConfig) -> float:
    """Bytes of bf16 weights one forward reads (the embedding only for its rows: excluded)."""
    return 2.0 * (cfg.params() - cfg.vocab * cfg.dim)


def on_stream(stream: torch.cuda.Stream | None) -> AbstractContextManager:
    """``torch.cuda.stream(stream)``, or nothing for None (a CPU, or one shared stream)."""
    return nullcontext() if stream is None else torch.cuda.stream(stream)


class StepClock:
    """Times between decode steps without waiting for the GPU: a CUDA event per step recorded on the
    stream the step ran on (read after the run), or the host clock on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def tick(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()  # on the current stream: the one the decode step was issued on
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def gaps_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:], strict=False)]

    def summary(self) -> dict[str, float]:
        """Largest, p99 and median gap between consecutive decode steps (ms)."""
        gaps = torch.tensor(self.gaps_ms(), dtype=torch.float64)
        if not gaps.numel():
            return {}
        return {"decode_gap_max_ms": float(gaps.max()), "decode_gap_p99_ms": float(gaps.quantile(0.99)),
                "decode_gap_p50_ms": float(gaps.median())}
