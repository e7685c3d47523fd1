"""Baseline autograd: a small model's training step launched op by op from Python.

Baseline: eager forward, autograd backward and a foreach SGD update for a 2-layer, 256-wide GPT
on 4 x 128 tokens. Each kernel is tiny (microseconds of work), so the step is bound by the
host: Python, the dispatcher and autograd's engine issue several hundred launches of ~5-7 us
each while the GPU mostly waits.
Optimized (optimized_autograd_standard.py): the whole run (parameter restore, forward,
backward, update, twice) is captured once into a CUDA graph in setup() and replayed with one
launch: same kernels, same bytes, no per-kernel host overhead.
Expect: 3-8x on an H100/H200 (the graph replays ~1 us per kernel instead of ~6.5 us).
Measured on our H200: 4.91 -> 1.28 ms (3.83x).
Tolerance: fp32, and the graph replays the very kernels eager ran: fp32 defaults (rtol 1e-4).
Run: python ch13/baseline_autograd_standard.py  |  aisp bench run -t ch13:autograd_standard
"""

from __future__ import annotations

from ch13_gpt import TrainBench, train_workload

import aisp
from aisp.kits.gpt import GPTConfig

WORKLOAD = train_workload(model=GPTConfig(vocab=1024, seq=128, dim=256, heads=4, layers=2), batch=4,
                          precision="fp32", requires=aisp.Requirements(cuda=True),
                          ceiling_note="profiled (torch profiler, H200): the graph's 214 fp32 kernels span 1.30 ms, 93% busy; "
                                       "median kernel 3.2 us; FFMA GEMMs 51%, attention 19%",
                          window="idle")


class EagerStep(TrainBench):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return EagerStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
