"""Baseline cooperative persistent (CUDA C++): 256 dependent steps of 1-D heat diffusion as 256
kernel launches.

Baseline: u <- u + 0.25 (u[i-1] - 2 u[i] + u[i+1]) on 2,097,152 fp32 points (8 MB, zero outside),
256 explicit time steps. Each step depends on the whole previous one, so the natural code is one
``heat_step`` launch per step, ping-ponging between two global buffers (cooperative_persistent.cu):
256 launches, each with its fill and drain of the GPU, and 16 MB through L2 per step.
Optimized (optimized_cooperative_persistent.py): one cooperative kernel with one block per SM;
each block keeps its 15,888-point chunk in shared memory for all 256 steps, trading only its two
edge values per step through global memory, with ``grid.sync()`` between steps.
Same operands into the same expression: the outputs should agree bit for bit.
Expect (measured, H200, 2026-11-23): 1.79 ms for 256 steps, 7.0 us per launched step (launch, fill
and drain, 16 MB through L2).
Run: python ch10/baseline_cooperative_persistent.py  |  aisp bench run -t ch10:cooperative_persistent
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from ch10b_common import FLOAT, INT, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class HeatWorkload(aisp.Workload):
    n: int = 1 << 21
    steps: int = 256
    k: float = 0.25
    """Diffusion number: the explicit scheme is stable for k <= 0.5."""


def _workload() -> HeatWorkload:
    s = HeatWorkload()
    # element_tol 1.4e-5 of max|u| (~0.7 after 256 steps from N(0, 1)): 1e-5 absolute.
    # One step is 4 FLOPs per point (sub, add, mul, FMA); the fewest bytes are u0 read once and the result written once.
    return HeatWorkload(flops=4.0 * s.n * s.steps, bytes=8.0 * s.n, items=s.steps, item_unit="steps", precision="fp32_simt",
                        element_tol=1.4e-5, requires=aisp.Requirements(cuda=True, executables=("nvcc",)),
                        ceiling_note="profiled (torch profiler, H200): one kernel of 1.02 ms a call, GPU busy 90%: 4.0 us a step for 256 grid.sync() steps on 8 MB (baseline 6.1 us)",
                        window="idle")


WORKLOAD = _workload()
LIBRARY = library("cooperative_persistent.cu")


def heat_reference(u: torch.Tensor, steps: int, k: float) -> torch.Tensor:
    """The diffusion in PyTorch, zero outside the array."""
    for _ in range(steps):
        p = F.pad(u, (1, 1))
        u = u + k * (p[:-2] - 2 * u + p[2:])
    return u


class LaunchPerStep(aisp.Benchmark):
    """u after `steps` heat-diffusion steps from u0."""

    workload = WORKLOAD
    inputs = ("u0",)
    scratch = ("out", "tmp", "halo")
    persistent = 0
    """cooperative_persistent.cu: 0 one launch per step, 1 one cooperative kernel with grid.sync()."""

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, {"heat_run": [INT, PTR, PTR, PTR, PTR, INT, INT, FLOAT, PTR]})
        self.u0 = torch.randn(w.n, device=self.device, generator=self.generator())
        self.out, self.tmp = torch.empty_like(self.u0), torch.empty_like(self.u0)
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.halo = torch.empty(4 * sms, device=self.device)
        torch.testing.assert_close(self.run(), heat_reference(self.u0, w.steps, w.k), rtol=1e-4, atol=1e-5)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.heat_run(self.persistent, ptr(self.u0), ptr(self.out), ptr(self.tmp), ptr(self.halo), w.n,
                                   w.steps, w.k, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return LaunchPerStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
