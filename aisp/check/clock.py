"""Timing a kernel against its reference with the harness's timer: the two interleaved (the order
alternates, so drift and the slot after the sync cancel), one timed call drawn at random checked on
refilled inputs; on a GPU each call's events time device work (a spacer kernel covers the host's
issue time, as in the harness's device window) and a device-wide sync after the end event catches
work left on a side stream. The speedup is the harness's paired ratio (reference / kernel) with its 95% interval."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aisp.check.calls import Fired, judge, reference, refill
from aisp.harness.benchmark import Workload
from aisp.harness.stats import Ratio, paired_ratio
from aisp.harness.timing import Timed, empty_tails, gc_disabled, spacer_ms, time_call, unseen_work
from aisp.harness.verify import detach_copy

Clock = Callable[..., Timed]
"""``clock(call, device, calls, spacer)``: one timed window (the harness's ``time_call``)."""


@dataclass(frozen=True)
class Timing:
    """Medians (ms) and the speedup of one case."""

    ref_ms: float
    fn_ms: float
    speedup: Ratio


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def time_pair(fn: Callable, ref: Callable, args: Sequence[Any], workload: Workload, device: torch.device,
              warmup: int, iterations: int, clock: Clock = time_call) -> Timing:
    """Interleaved timing; raises :class:`Fired` when the checked call's answer is stale
    (``cached-answer``) or the kernel leaves work outside the timed stream (``unjoined-stream``)."""
    rng = random.SystemRandom()
    at = warmup + rng.randrange(iterations)
    samples: dict[str, list[Timed]] = {"ref": [], "fn": []}
    with gc_disabled():
        for i in range(warmup + iterations):
            expected = None
            if i == at:  # outside the timed windows: new values, and the answer they must give
                refill(args, rng.randrange(2**31))
                expected = reference(ref, args, device)
            for name in ("fn", "ref") if i % 2 else ("ref", "fn"):
                issued = [t.issue_ms for t in samples[name][-5:]] or [0.0]
                timed = clock(lambda f=(fn if name == "fn" else ref): f(*args), device,
                              spacer=spacer_ms(issued) if device.type == "cuda" else 0.0)
                samples[name].append(timed)
                if expected is not None and name == "fn":
                    _check_timed(expected, timed.output, workload)
        samples = {name: timed[warmup:] for name, timed in samples.items()}
        tails = [t.tail_ms for t in samples["fn"] if t.tail_ms is not None]
        # What the tail's sync costs here with nothing left (a loaded host, a GPU other processes
        # share): the harness's empty calls, subtracted as it subtracts them.
        empty = empty_tails(device, spacer_ms([t.issue_ms for t in samples["fn"][-5:]]), clock) if tails else []
    unseen = unseen_work(tails, [t.device_ms for t in samples["fn"] if t.device_ms is not None], empty_ms=empty)
    if unseen:
        raise Fired("unjoined-stream", unseen)
    ref_ms, fn_ms = [t.ms for t in samples["ref"]], [t.ms for t in samples["fn"]]
    return Timing(_median(ref_ms), _median(fn_ms), paired_ratio(ref_ms, fn_ms, 2))


def _check_timed(expected: list, output: Any, workload: Workload) -> None:
    try:
        judge(expected, detach_copy(output), workload)
    except Fired as exc:
        raise Fired("cached-answer", f"at a timed call after the inputs were refilled: {exc.reason}") from None
