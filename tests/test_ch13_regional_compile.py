"""ch13:regional_compile times a cold start: every run() compiles again (Dynamo reset, compile
caches off), the whole-model variant traces depth times the operations the regional one does,
and both report the steady-state cost and a fresh-process cold start beside the headline."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

import aisp
from aisp.harness.loader import import_module_at
from aisp.kits.gpt import GPTConfig

CH13 = Path(__file__).resolve().parents[1] / "ch13"
VARIANTS = ("baseline_regional_compile", "optimized_regional_compile")


def build(module: str, device: str = "cpu", **sizes: object) -> aisp.Benchmark:
    bench = import_module_at(CH13 / f"{module}.py").get_benchmark()
    bench.device = torch.device(device)
    if sizes:
        bench.workload = dataclasses.replace(bench.workload, **sizes)
    bench.setup()
    return bench


TINY = dict(model=GPTConfig(seq=16, dim=32, heads=2, layers=3), batch=2, seq=16, backend="eager")


@pytest.mark.parametrize("module", VARIANTS)
def test_every_call_compiles_again(module: str) -> None:
    bench = build(module, **TINY)
    for _ in range(2):
        graphs = counters["stats"]["unique_graphs"]
        bench.run()
        assert counters["stats"]["unique_graphs"] == graphs + 1, "run() reused a compiled graph"


def test_regional_compile_traces_one_block_of_the_whole_models_ops() -> None:
    whole, regional = (build(m, **TINY) for m in VARIANTS)
    whole.run()
    regional.run()
    assert regional.traced_ops > 0 and whole.traced_ops == TINY["model"].layers * regional.traced_ops


def test_steady_state_calls_do_not_recompile() -> None:
    bench = build(VARIANTS[1], **TINY)
    bench.run()
    graphs = counters["stats"]["unique_graphs"]
    assert bench.steady_ms(calls=3) > 0
    assert counters["stats"]["unique_graphs"] == graphs


@pytest.mark.gpu
def test_regional_cold_start_is_faster_and_metrics_are_reported_on_gpu() -> None:
    seconds, steady = {}, {}
    for module in VARIANTS:
        bench = build(module, "cuda")
        bench.run()  # kernel binaries built once, as in the harness's warmup
        seconds[module] = min(bench.cold_start_s() for _ in range(2))
        metrics = bench.metrics()
        assert math.isfinite(metrics["cold_process_s"]) and metrics["cold_process_s"] > 0
        steady[module] = metrics["steady_ms"]
    assert seconds[VARIANTS[1]] < seconds[VARIANTS[0]]
    # Regional compile enters compiled code once per block, a host cost at this size: its steady call
    # read 1.23x, 1.33x and 1.43x the whole model's on H200 hosts (2026-11-29/30; the last 1.50 against
    # 1.05 ms). 2x bounds that and still catches a call that recompiles (hundreds of ms).
    assert steady[VARIANTS[1]] < 2.0 * steady[VARIANTS[0]]


def test_cold_start_runs_with_empty_cache_directories() -> None:
    assert build(VARIANTS[0], **TINY).cold_start_s() > 0
