"""ch13:kv_cache_naive's fused variants on a CPU: the one-buffer graph variant writes a step's key and
value with one copy (the preallocated variant with two); the fused Triton append-and-attend kernel
verifies against the baseline under TRITON_INTERPRET=1 (partial tiles, poisoned scratch, refilled
inputs) and compiles for sm_90 without spilling, its next tile's loads issued inside the loop."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from triton_cpu import INTERPRETER_FIX, compile_sm90, fits_sm90

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


INTERPRETED = INTERPRETER_FIX + """
import dataclasses, sys
from pathlib import Path
import torch
sys.path[:0] = [{ch13!r}, {tests!r}]
from test_ch13_kv_cache import build
from refill_check import check_refilled_pair, check_two_seeds
from aisp.harness.execute import guarded_run
from aisp.harness.verify import compare, poison_scratch, tensor_attributes
check_two_seeds(build, "baseline_kv_cache_naive", "optimized_kv_cache_naive_fused")
base, opt = build("baseline_kv_cache_naive", 0), build("optimized_kv_cache_naive_fused", 0)
base.setup(); opt.setup()
ref = guarded_run(base)
poison_scratch(opt, set(tensor_attributes(opt)))
compare(ref, guarded_run(opt), base.workload)
check_refilled_pair(build("baseline_kv_cache_naive", 0), build("optimized_kv_cache_naive_fused", 0), base.workload)
print("interpreted ok")
"""


def test_fused_variant_verifies_under_the_triton_interpreter() -> None:
    pytest.importorskip("triton")
    script = INTERPRETED.format(ch13=str(CH13), tests=str(ROOT / "tests"))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0 and "interpreted ok" in proc.stdout, proc.stderr[-3000:]


def test_fused_kernel_compiles_for_sm90_without_spills() -> None:
    """At the pair's head_dim (128) and tile (64 rows, 4 warps), as the launch specializes it; its
    16-byte loads: K and V tiles of 64 x 128 bf16 each, over 128 threads, 8 loads a tile a thread, in
    the prologue and again in the loop (the next tile's, in flight while this one computes): 32."""
    fused = import_module_at(CH13 / "optimized_kv_cache_naive_fused.py")
    sig = dict.fromkeys(("q_ptr", "nk_ptr", "nv_ptr", "k_ptr", "v_ptr", "o_ptr"), "*bf16") | dict(
        t="i32", pos="i32", steps="i32", length="i32", scale="fp32")
    compiled = compile_sm90("ch13/optimized_kv_cache_naive_fused:append_attend_kernel", sig,
                            {"D": 128, "BLOCK_N": fused.BLOCK_N}, {"num_warps": 4}, divisible=("steps", "length"))
    fits_sm90(compiled)
    per_tile = fused.BLOCK_N * 128 * 2 // (128 * 16)
    assert compiled.asm["ptx"].count("ld.global.v4") == 2 * 2 * per_tile
