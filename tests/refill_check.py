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
    _refilled_pair_matches(base, opt, before, workload)


def _refilled_pair_matches(base: aisp.Benchmark, opt: aisp.Benchmark, before: list, workload: aisp.Workload) -> None:
    """``base`` and ``opt``, set up and run once (``before``: the baseline's output), refilled with new
    values: the baseline's output changes and the optimized variant's matches it; both torn down."""
    assert input_signature(base), f"{type(base).__name__} declares no per-call inputs"
    for bench in (base, opt):
        refill(bench, seed=12345)
    after = guarded_run(base)
    assert any(not torch.equal(a, b) for (_, a), (_, b) in zip(before, after, strict=True)), "inputs drive nothing"
    compare(after, guarded_run(opt), workload)
    base.teardown()
    opt.teardown()


def _matched_pair(build: Callable[[str, int], aisp.Benchmark], baseline: str, optimized: str, seed: int,
                  workload: aisp.Workload) -> tuple[aisp.Benchmark, aisp.Benchmark, list]:
    """Seed ``seed``'s pair set up and run once, the optimized output compared with the baseline's:
    (baseline, optimized, the baseline's output)."""
    base, opt = build(baseline, seed), build(optimized, seed)
    base.setup()
    opt.setup()
    out = guarded_run(base)
    compare(out, guarded_run(opt), workload)
    return base, opt, out


def check_two_seeds(build: Callable[[str, int], aisp.Benchmark], baseline: str, optimized: str) -> None:
    """On seeds 0 and 1 the optimized output matches the baseline's, and seed 1's answer fails
    against seed 0's (so the comparison can fail)."""
    workload = build(baseline, 0).workload
    refs = {seed: _matched_pair(build, baseline, optimized, seed, workload)[2] for seed in (0, 1)}
    with pytest.raises(VerificationError):
        compare(refs[0], refs[1], workload)


def check_pair(build: Callable[[str, int], aisp.Benchmark], baseline: str, optimized: str) -> None:
    """:func:`check_two_seeds` and then :func:`check_refilled_pair` on seed 0's benchmarks, in one pass:
    seed 0's pair, set up and run once (the outputs compared: the first seed's match), is the pair that
    check_refilled_pair sets up and runs once before it refills both, so those first runs serve both
    checks instead of running again on a second set of seed-0 benchmarks (a run of a Triton variant
    under the interpreter takes seconds). The same checks: two seeds match, seed 1's answer fails
    against seed 0's, the baseline's declared inputs drive its output and the refilled pair matches."""
    workload = build(baseline, 0).workload
    base, opt, before = _matched_pair(build, baseline, optimized, 0, workload)
    _refilled_pair_matches(base, opt, before, workload)
    other = _matched_pair(build, baseline, optimized, 1, workload)[2]
    with pytest.raises(VerificationError):
        compare(before, other, workload)
