"""Baseline concurrent kernels: 16 small independent kernels, one after another on one stream.

Baseline: 16 launches of a small CUDA C++ kernel (ch11_kernels.cu ``fma_chain``: 8 blocks of 256
threads, each thread 20,000 dependent FMAs on its own element; ~40 us, estimate), each on its own
row of a (16, 2048) tensor. One stream runs them in order, so 8 of the GPU's 132 SMs work and 124
wait: time = 16 x one kernel. (Small independent kernels are common: per-expert or per-request
work, a model's independent branches; PyTorch's own kernels usually fill the GPU, hence a kernel
of our own.)
Optimized (optimized_concurrent_kernels.py): the 16 launches spread over 8 streams; separate hardware
work queues (Hyper-Q; CUDA opens 8 by default, CUDA_DEVICE_MAX_CONNECTIONS up to 32) feed them to
idle SMs side by side: ~2 x one kernel, plus launches.
``metrics()`` times each stream's share alone (2 kernels) and reports the overlap share
(0 = 16 kernels in a row, 1 = the 2-kernel ideal).
Expect: 3.31x [3.13, 3.51] measured on an H200 (0.779 -> 0.231 ms; ideal 7.96x over
the sum of parts); overlap share 0.86, the call at 49% of the ideal (0.113 ms).
Run: python ch11/baseline_concurrent_kernels.py  |  aisp bench run -t ch11:concurrent_kernels
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch11_common import THREADS, load_kernels, overlap, small_kernel

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class KernelsWorkload(aisp.Workload):
    kernels: int = 16
    blocks: int = 8
    """Blocks per kernel (of 256 threads, one element each)."""
    iters: int = 20_000
    """Dependent FMAs per thread."""
    streams: int = 8
    """Streams the optimized variant spreads the kernels over."""


def _workload() -> KernelsWorkload:
    s = KernelsWorkload()
    # The longest chain of dependent FMAs is one thread's `iters`: the 16 kernels are independent and
    # could all run at once (16 x 8 = 128 blocks on 132 SMs), so the chain is one kernel's, not 16's.
    return KernelsWorkload(flops=2.0 * s.kernels * s.blocks * THREADS * s.iters, items=s.kernels,
                           item_unit="kernels", precision="fp32_simt", requires=native.REQUIRES,
                           latency=aisp.LatencyCounts(dependent_fmas=s.iters),
                           ceiling_note="ncu: each kernel is 8 blocks of dependent FMAs (SM 3.1%, wait stalls), 47.7 us; "
                                        "16 on 8 streams run 2 rounds of it: half one kernel's chain at best")


WORKLOAD = _workload()


class OneStreamKernels(aisp.Benchmark):
    """out[k] = fma_chain(x[k]) for k < 16, each a separate 8-block kernel."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)

    def setup(self) -> None:
        w = self.workload
        self.lib = load_kernels(self.device)
        self.x = torch.randn(w.kernels, w.blocks * THREADS, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)

    def launch(self, k: int, stream: torch.cuda.Stream) -> None:
        small_kernel(self.lib, self.x[k], self.out[k], self.workload.iters, stream)

    def run(self) -> torch.Tensor:
        current = torch.cuda.current_stream(self.device)
        for k in range(self.workload.kernels):
            self.launch(k, current)
        return self.out

    def stream_share(self, j: int) -> None:
        """The kernels the optimized variant puts on stream j, on the current stream."""
        w = self.workload
        for k in range(j, w.kernels, w.streams):
            self.launch(k, torch.cuda.current_stream(self.device))

    def metrics(self) -> dict[str, float]:
        """Each stream's share alone, their sum and max, this variant's call, its overlap share."""
        parts = {f"stream{j}": (lambda j=j: self.stream_share(j)) for j in range(self.workload.streams)}
        return overlap(parts, self.run, self.device)


def get_benchmark() -> aisp.Benchmark:
    return OneStreamKernels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
