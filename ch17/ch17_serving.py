"""What chapter 17's serving pairs share (on the kit :mod:`aisp.kits.llm`; the bytes a decode step
reads and the clock of the gaps between decode steps are in :mod:`aisp.kits.llm.serving`): the
decoders they serve and the stream a step is issued on.

``MODEL`` is chapter 15's decoder (8 layers, width 1024, 16 query heads on 4 K/V heads, 156M
parameters); ``WIDE`` two blocks of a 70B-class layer (width 8192, 64 query heads on 8 K/V heads,
SwiGLU 28,672; 2.24B parameters), whose batch-1 decode step is bound by reading its 3.95 GB of
weights, not by launches. bf16 on a GPU, fp32 on a CPU (the tests run tiny configurations).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

import aisp
from aisp.kits.llm import LLMConfig

MODEL = LLMConfig(vocab=32000, dim=1024, layers=8, heads=16, kv_heads=4, ffn=2816)
WIDE = LLMConfig(vocab=32000, dim=8192, layers=2, heads=64, kv_heads=8, ffn=28672)
GPU_SIZED = aisp.Requirements(cuda=True)
"""Sized for an H100/H200; tests/test_ch17_pairs.py runs the same code at tiny sizes on a CPU."""


def on_stream(stream: torch.cuda.Stream | None) -> AbstractContextManager:
    """``torch.cuda.stream(stream)``, or nothing for None (a CPU, or one shared stream)."""
    return nullcontext() if stream is None else torch.cuda.stream(stream)
