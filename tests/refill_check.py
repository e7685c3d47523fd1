"""Shared by the chapter tests: a pair's declared per-call inputs drive its baseline, and the
optimized variant matches the baseline once both have been refilled with new values."""

from __future__ import annotations

import torch

import aisp
from aisp.harness.execute import guarded_run
from aisp.harness.verify import compare, input_signature, refill


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
