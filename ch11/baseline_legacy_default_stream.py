"""Baseline legacy default stream: two worker streams and the application's own work on the
default stream, serialized by the legacy default stream's implicit synchronization (CUDA C++).

Baseline: ch11_kernels.cu ``legacy_run`` mode 0. Three independent jobs of 32 small kernels each
(``fma_chain``, 8 blocks, ~20 us, estimate): two on worker streams made with ``cudaStreamCreate``
(blocking streams, the default), one launched on the default stream, as code does that launches
``kernel<<<grid, block>>>`` without a stream or calls a library without one. The legacy default
stream synchronizes with every blocking stream: each of its kernels waits for all work queued
before it in the workers, and their next kernels wait for it. The workers overlap each other but
take turns with the default stream: ~32 x 2 kernels instead of 32 x 1.
Optimized: optimized_legacy_default_stream.py (workers made with ``cudaStreamNonBlocking``) and
optimized_legacy_default_stream_per_thread.py (blocking workers, the application's kernels on the
per-thread default stream, what ``nvcc --default-stream per-thread`` gives a launch without a
stream). Same kernels, same launches; only stream semantics change: the three jobs overlap.
PyTorch creates its side streams non-blocking, so this pitfall shows only in CUDA C++.
``metrics()`` times each job alone and reports the overlap share (0 = sum, 1 = one job's time).
Expect: 1.97x [1.97, 1.98] measured on an H200 for both variants (1.70 -> 0.862
ms non-blocking, 0.860 ms per-thread; ideal 2x over the baseline, 3x over fully serial work).
Run: python ch11/baseline_legacy_default_stream.py  |  aisp bench run -t ch11:legacy_default_stream
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch11_common import THREADS, load_kernels, overlap, small_kernel

import aisp
from aisp.kits import native

JOBS = 3
"""Two worker streams and the default stream (the shape ``legacy_run`` expects)."""


@dataclass(frozen=True, kw_only=True)
class LegacyWorkload(aisp.Workload):
    steps: int = 32
    """Kernels per job."""
    blocks: int = 8
    iters: int = 10_000
    """Dependent FMAs per thread."""


def _workload() -> LegacyWorkload:
    s = LegacyWorkload()
    # The longest chain of kernels that run one after another is one job's `steps`: legacy_run launches
    # job j's kernel i after its kernel i - 1 on the job's stream, which every variant keeps (only the
    # streams' synchronization with each other changes), while the 3 jobs may overlap. Each kernel's
    # thread runs `iters` dependent FMAs, so the longest chain of them is steps x iters.
    return LegacyWorkload(flops=2.0 * JOBS * s.steps * s.blocks * THREADS * s.iters, items=JOBS * s.steps,
                          item_unit="kernels", precision="fp32_simt", requires=native.REQUIRES,
                          latency=aisp.LatencyCounts(dependent_fmas=s.steps * s.iters),
                          ceiling_note="profiled (torch profiler, H200): 96 fma_chain kernels of 23.8 us (8 blocks each), "
                                       "2.46 at a time: GPU busy 91% of a 0.93 ms window")


WORKLOAD = _workload()


class BlockingWorkers(aisp.Benchmark):
    """out[j, i] = fma_chain(x[j, i]) for 3 jobs of 32 kernels, launched by ``legacy_run``."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    mode = 0
    """legacy_run's mode: 0 blocking workers, 1 non-blocking workers, 2 per-thread default stream."""

    def setup(self) -> None:
        w = self.workload
        self.lib = load_kernels(self.device)
        self.x = torch.randn(JOBS, w.steps, w.blocks * THREADS, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.legacy_run(self.mode, self.x.data_ptr(), self.out.data_ptr(), w.steps,
                                     w.blocks * THREADS, w.iters, native.stream(self.device))
        native.check(status, f"legacy_run(mode={self.mode})")
        return self.out

    def job(self, j: int) -> None:
        """Job j's kernels alone, on the current stream."""
        stream = torch.cuda.current_stream(self.device)
        for i in range(self.workload.steps):
            small_kernel(self.lib, self.x[j, i], self.out[j, i], self.workload.iters, stream)

    def metrics(self) -> dict[str, float]:
        """Each job alone, their sum and max, this variant's call, and its overlap share."""
        parts = {f"job{j}": (lambda j=j: self.job(j)) for j in range(JOBS)}
        return overlap(parts, self.run, self.device)


def get_benchmark() -> aisp.Benchmark:
    return BlockingWorkers()


if __name__ == "__main__":
    aisp.main(get_benchmark)
