"""Shared by the chapter GPU tests: the transient peak of one call of a pair's variant."""

from __future__ import annotations

import torch

import aisp


def run_peak_bytes(bench: aisp.Benchmark) -> int:
    """Set ``bench`` up on the GPU, then the peak allocated during one ``run()`` above what the setup
    keeps; the variant is dropped and the cache emptied after."""
    bench.device = torch.device("cuda")
    bench.setup()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    bench.run()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del bench
    torch.cuda.empty_cache()
    return peak
