"""ch13:kv_cache_naive's one-buffer graph variant on a CPU: it writes a step's key and value with one
copy (the preallocated variant with two)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import aisp
from aisp.harness.loader import import_module_at

ROOT = Path(__file__).resolve().parents[1]
CH13 = ROOT / "ch13"
SMALL = dict(batch=2, heads=2, head_dim=32, prompt=70, steps=6)
"""A prompt that is no multiple of the kernel's 64-row tile, so every step's last tile is partial."""


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = import_module_at(CH13 / f"{module}.py").get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    bench.workload = dataclasses.replace(bench.workload, **SMALL)
    return bench


class CopyCount(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.copies += func is torch.ops.aten.copy_.default
        return func(*args, **(kwargs or {}))


def copies_per_call(module: str) -> int:
    bench = build(module, 0)
    bench.setup()
    with CopyCount() as count:
        bench.run()
    return count.copies


def test_one_buffer_variant_writes_one_slot_copy_a_step() -> None:
    """Four copies a call (the prompt's K and V, the staged new K and V), then one a step; the
    preallocated variant: two for the prompt, then two a step."""
    steps = SMALL["steps"]
    assert copies_per_call("optimized_kv_cache_naive") == 2 + 2 * steps
    assert copies_per_call("optimized_kv_cache_naive_graph") == 4 + steps
