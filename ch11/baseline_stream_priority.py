"""Baseline stream priority: a latency-critical chain of small kernels on a second stream of the
default priority, behind bulk work that fills the GPU.

Baseline: two jobs start together. Bulk (current stream): 12 passes of ``y = 0.9 y`` over a 256 MiB
fp32 tensor (~0.12 ms each at HBM speed, ~1.5 ms in all, estimate): grids of thousands of short
blocks that fill every SM. Latency-critical (a second stream, priority 0 like the bulk): a chain of
64 dependent small kernels (ch11_kernels.cu ``fma_chain``, 8 blocks, ~30 us each, ~2 ms alone,
estimate), like the decode steps of a request served next to a batch job. At equal priority the
block scheduler gives SM slots that free up to the bulk grid queued first: each chain kernel waits
until the running bulk pass has issued all its blocks, so the chain advances about one step per
bulk pass while the bulk runs: the call takes ~bulk + most of the chain.
Optimized (optimized_stream_priority.py): the chain's stream is created with high priority
(``torch.cuda.Stream(priority=-1)``): when a bulk block finishes, the chain's pending block is
issued first (priority does not preempt running blocks, but bulk blocks last microseconds), so the
chain runs alongside the bulk at nearly its own speed.
Headline: the chain's latency. It is sized to take longer alone than the bulk, so it ends last in
both variants and the call's time is its latency (on a GPU where it runs faster than estimated the
optimized time becomes the bulk's). ``metrics()`` reports it directly: ``chain_latency_ms``
(CUDA events on the chain's stream, first to last kernel of one call) against ``chain_alone_ms``
(the chain on an idle GPU: its floor), ``bulk_alone_ms`` and the call's overlap share.
Expect: 1.21x [1.21, 1.21] measured on an H200 (3.50 -> 2.88 ms); chain latency 3.55 ->
2.77 ms against 2.33 ms alone (52% -> 19% above it).
Run: python ch11/baseline_stream_priority.py  |  aisp bench run -t ch11:stream_priority
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch11_common import THREADS, load_kernels, overlap, small_kernel

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class PriorityWorkload(aisp.Workload):
    bulk_mib: int = 256
    """Size of the bulk job's tensor."""
    bulk_passes: int = 12
    chain_steps: int = 64
    """Dependent small kernels in the latency-critical chain."""
    chain_blocks: int = 8
    chain_iters: int = 15_000
    """Dependent FMAs per thread per chain kernel."""


def _workload() -> PriorityWorkload:
    s = PriorityWorkload()
    bulk_bytes = 2.0 * s.bulk_passes * s.bulk_mib * 2**20
    chain_flops = 2.0 * s.chain_steps * s.chain_blocks * THREADS * s.chain_iters
    # The longest chain of dependent FMAs is the chain job's: each of its `chain_steps` kernels reads the
    # one before's output (chain(): src -> dst), so an element's value goes through every kernel's
    # `chain_iters` dependent FMAs in turn: chain_steps x chain_iters. The bulk passes run beside it.
    # fp32_simt: the chain's FFMAs and the bulk's multiplies run on the CUDA cores (no matmul), as in
    # concurrent_kernels and legacy_default_stream; same fp32 tolerance.
    return PriorityWorkload(bytes=bulk_bytes, flops=chain_flops + bulk_bytes / 8, precision="fp32_simt",
                            requires=native.REQUIRES,
                            latency=aisp.LatencyCounts(dependent_fmas=s.chain_steps * s.chain_iters),
                            ceiling_note="profiled (torch profiler, H200): the chain's fma_chain kernels run 39.3 us each (30.7 us of "
                                         "FMAs) beside the bulk's 12 passes of 127 us; PDL: 40.9 us a step")


WORKLOAD = _workload()


class EqualPriority(aisp.Benchmark):
    """Bulk passes on the current stream and the small-kernel chain on a second stream."""

    workload = WORKLOAD
    inputs = ("bulk_in", "h0")
    scratch = ("bulk_bufs", "chain_bufs")
    priority = 0
    """The chain stream's priority (lower is higher; 0 is the default and the lowest)."""
    pdl = False
    """Whether the chain's kernels are launched with programmatic dependent launch."""

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.lib = load_kernels(dev)
        self.bulk_in = torch.randn(w.bulk_mib * 2**20 // 4, device=dev, generator=gen)
        self.bulk_bufs = [torch.empty_like(self.bulk_in) for _ in range(2)]
        self.h0 = torch.randn(w.chain_blocks * THREADS, device=dev, generator=gen)
        self.chain_bufs = [torch.empty_like(self.h0) for _ in range(2)]
        self.chain_stream = torch.cuda.Stream(dev, priority=self.priority)
        self.chain_start = torch.cuda.Event(enable_timing=True)
        self.chain_end = torch.cuda.Event(enable_timing=True)

    def bulk(self) -> torch.Tensor:
        """The bulk passes on the current stream; returns the last output."""
        src = self.bulk_in
        for k in range(self.workload.bulk_passes):
            src = torch.mul(src, 0.9, out=self.bulk_bufs[k % 2])
        return src

    def step(self, src: torch.Tensor, dst: torch.Tensor, stream: torch.cuda.Stream) -> None:
        """One kernel of the chain: dst = fma_chain(src) on ``stream``."""
        small_kernel(self.lib, src, dst, self.workload.chain_iters, stream, pdl=self.pdl)

    def chain(self, stream: torch.cuda.Stream) -> torch.Tensor:
        """The dependent chain on ``stream``; returns the last output."""
        src = self.h0
        for i in range(self.workload.chain_steps):
            dst = self.chain_bufs[i % 2]
            self.step(src, dst, stream)
            src = dst
        return src

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        current = torch.cuda.current_stream(self.device)
        self.chain_stream.wait_stream(current)
        bulk = self.bulk()
        self.chain_start.record(self.chain_stream)
        chain = self.chain(self.chain_stream)
        self.chain_end.record(self.chain_stream)
        current.wait_stream(self.chain_stream)
        return bulk, chain

    def chain_latency_ms(self) -> float:
        """The chain's span in the last call (its stream's events around its kernels), once it is done."""
        return self.chain_start.elapsed_time(self.chain_end)

    def metrics(self) -> dict[str, float]:
        """The chain's latency inside a call, each job alone, and the call's overlap share."""
        self.run()
        torch.cuda.synchronize(self.device)
        latency = self.chain_latency_ms()
        parts = {"chain_alone": lambda: self.chain(torch.cuda.current_stream(self.device)),
                 "bulk_alone": self.bulk}
        return {"chain_latency_ms": latency, **overlap(parts, self.run, self.device)}


def get_benchmark() -> aisp.Benchmark:
    return EqualPriority()


if __name__ == "__main__":
    aisp.main(get_benchmark)
