"""Baseline preallocated buffers: a per-step loop that creates its tensors anew every step.

Baseline: 64 steps of ``total = total + relu(x[s] * scale + b)`` on 1024x1024 fp32 tiles. Every
step builds a scale tensor from a Python float (a blocking host-to-device copy on a GPU, which
drains the launch queue), and every operator allocates a fresh output (``aten::empty_strided``
in the profile); on a CPU the fresh buffers also cost page faults and cache misses.
Optimized (optimized_preallocated_buffers.py): scales, the work tile and the running total are
allocated once in setup() and written in place (``out=``, ``mul_``, ``relu_``, ``add_``). Same
kernels, same bytes, same result; no allocation, no copy and no host sync inside the loop.
Expect: about 1.5-2.5x on an H100/H200 (host-bound steps no longer wait on the GPU), 1.5-2x on a CPU.
Run: python ch01/baseline_preallocated_buffers.py  |  aisp bench run -t ch01:preallocated_buffers
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class StepWorkload(aisp.Workload):
    steps: int = 64
    rows: int = 1024
    dim: int = 1024


OPS_PER_STEP = 4
"""The ops one step of the lesson's loop needs: scale, bias, ReLU, accumulate."""


def _step_workload() -> StepWorkload:
    shape = StepWorkload()
    tile = shape.rows * shape.dim
    # Fewest bytes: read every x tile once, write the total once (fp32).
    # Latency: the lesson keeps its four ops a step (mul, add, relu, add), each dispatched from Python (an
    # eager launch on a GPU, priced at the lower dispatch floor so a CPU's peaks price it too); the
    # optimized's zero_ of the total is left out (the first step could write the total).
    return StepWorkload(flops=4.0 * shape.steps * tile, bytes=4.0 * (shape.steps + 1) * tile,
                        latency=aisp.LatencyCounts(dispatches=OPS_PER_STEP * shape.steps),
                        items=shape.steps, item_unit="steps", precision="fp32",
                        ceiling_note="profiled (torch profiler, H200): host-bound: 257 kernels, 0.82 ms of kernel time, in a 5.33 ms window under the profiler (busy 16%); ATen host ops 78%",
                        window="idle")


WORKLOAD = _step_workload()


def step_scales(steps: int) -> list[float]:
    """The per-step scale a schedule would hand the loop as plain Python floats."""
    return [1.0 + 0.5 * s / steps for s in range(steps)]


class AllocatingSteps(aisp.Benchmark):
    """Creates the scale tensor and every intermediate inside the loop."""

    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.x = torch.randn(w.steps, w.rows, w.dim, device=self.device, generator=gen)
        self.b = torch.randn(w.dim, device=self.device, generator=gen)
        self.scales = step_scales(w.steps)

    def run(self) -> torch.Tensor:
        w = self.workload
        total = torch.zeros(w.rows, w.dim, device=self.device)
        for s in range(w.steps):
            scale = torch.tensor(self.scales[s], device=self.device)
            total = total + torch.relu(self.x[s] * scale + self.b)
        return total


def get_benchmark() -> aisp.Benchmark:
    return AllocatingSteps()


if __name__ == "__main__":
    aisp.main(get_benchmark)
