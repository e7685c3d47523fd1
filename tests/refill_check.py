"""Shared by the chapter tests: the optimized variant matches the baseline on two seeds while the
seeds' answers differ, and a pair's declared per-call inputs drive its baseline and the optimized
variant matches it once both have been refilled with new values."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import aisp
from aisp.harness.execute import guarded_run
from aisp.harness.verify import VerificationError, compare, input_signature, refill


def check_refilled_pair(base: aisp.Benchmark, opt: aisp.Benchmark, workload: aisp.Workload) -> None:
    """Both set up and run once; then refilled as before the harness's checked timed call."""
    base.setup()
    opt.setup()
    before = guarded_run(base)
    guarded_run(opt)
    assert input_signature(base), f"{type(base).__name__} declares no per-call inputs"
    for bench in (base, opt):
        refill(bench, seed=12345)
    after = guarded_run(base)
    assert any(not torch.equal(a, b) for (_, a), (_, b) in zip(before, after, strict=True)), "inputs drive nothing"
    compare(after, guarded_run(opt), workload)
    base.teardown()
    opt.teardown()


def check_two_seeds(build: Callable[[str, int], aisp.Benchmark], baseline: str, optimized: str) -> None:
    """On seeds 0 and 1 the optimized output matches the baseline's, and seed 1's answer fails
    against seed 0's (so the comparison can fail)."""
    workload = build(baseline, 0).workload
    refs = {}
    for seed in (0, 1):
        base, opt = build(baseline, seed), build(optimized, seed)
        base.setup()
        opt.setup()
        refs[seed] = guarded_run(base)
        compare(refs[seed], guarded_run(opt), workload)
    with pytest.raises(VerificationError):
        compare(refs[0], refs[1], workload)
