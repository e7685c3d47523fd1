"""The serving pieces of the LLM kit on a CPU: weight bytes, the step clock's gaps, and the
long-prompt scene's accounting, inputs and first prefill."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from aisp.kits.llm.serving import LongPromptArrival, LongPromptWorkload, StepClock, dtype_on, weight_bytes

CPU = torch.device("cpu")
TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)


def test_dtype_and_weight_bytes() -> None:
    assert dtype_on(CPU) == torch.float32 and dtype_on(torch.device("cuda")) == torch.bfloat16
    assert weight_bytes(TINY) == 2.0 * (TINY.params() - 256 * 64) == 2 * weight_bytes(TINY, 1.0)


def test_step_clock_reports_the_gaps() -> None:
    clock = StepClock(CPU)
    assert clock.summary() == {}
    for _ in range(5):
        clock.tick()
    assert len(clock.gaps_ms()) == 4
    summary = clock.summary()
    assert sorted(summary) == ["decode_gap_max_ms", "decode_gap_p50_ms", "decode_gap_p99_ms"]
    assert 0 <= summary["decode_gap_p50_ms"] <= summary["decode_gap_p99_ms"] <= summary["decode_gap_max_ms"]


def test_accounting_checks_the_sizes() -> None:
    w = LongPromptWorkload(model=TINY, running=3, context=10, steps=9, long=24, arrive=2, chunk=8)
    fields = w.accounting()
    assert fields["bytes"] == 8 * weight_bytes(TINY) and fields["items"] == 27
    assert fields["flops"] > TINY.forward_flops(24, 12) and fields["headline"] == "metric:decode_gap_p99_ms"
    with pytest.raises(AssertionError):
        LongPromptWorkload(model=TINY, steps=9, long=24, arrive=2, chunk=5).accounting()
    with pytest.raises(AssertionError):  # the chunks would not fit in the decode steps
        LongPromptWorkload(model=TINY, steps=4, long=24, arrive=2, chunk=8).accounting()


@dataclass(frozen=True, kw_only=True)
class TinyScene(LongPromptWorkload):
    model: LLMConfig = TINY
    running: int = 3
    context: int = 10
    long: int = 24
    chunk: int = 8


class Scene(LongPromptArrival):
    workload = TinyScene()


def test_setup_and_start_prefill_the_running_requests() -> None:
    bench = Scene()
    bench.device, bench.seed = CPU, 0
    bench.setup()
    assert bench.prompts.shape == (3, 10) and bench.long_prompt.shape == (24,)
    cache, steps = bench.start()
    ref = build_decoder(TINY, 0, CPU)
    expected = greedy_top(prefill(ref, DenseKVCache(TINY, 4, 42, CPU, torch.float32), list(bench.prompts)), TOP)
    assert len(steps) == 1 and torch.equal(steps[0][0], expected[0])
    torch.testing.assert_close(steps[0][1], expected[1])
    assert bench.metrics() == {}  # one tick: no gap yet
