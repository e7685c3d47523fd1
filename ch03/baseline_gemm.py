"""Baseline GEMM: a chain of 64 bf16 1024x1024 GEMMs launched one by one - the host-sensitive probe.

Baseline: ``h = h @ W[i]`` for 64 layers, each ``torch.mm(out=)`` launched eagerly. Each GEMM is
2.1 GFLOP, a few microseconds on an H100/H200 - about what Python, the dispatcher and the driver
take to launch it. So the GPU waits on the CPU between kernels, and the achieved TFLOP/s moves with
everything chapter 3 tunes on the host: CPU frequency governor, C-state exit latency, a launching
thread that is preempted or migrated, a busy neighbour on its core. Time it before and after
``ch03/system_tuning.sh`` to see the host's share.
Optimized (optimized_gemm.py): the same 64 GEMMs captured into a CUDA graph in setup() and replayed
with one launch: the host leaves the critical path and the chain runs at the GPU's GEMM rate,
which ``aisp peak`` measures for comparison (throughput is printed as TFLOP/s). Same kernels, same
bytes, bitwise the same result.
Expect: 2.18x measured on our H200 (0.830 -> 0.381 ms: 166 -> 361 TFLOP/s, 21% -> 46% of the
783 TFLOP/s bf16 ceiling ``aisp peak`` measured; a 1024^3 GEMM cannot fill the GPU on its own).
Run: python ch03/baseline_gemm.py  |  aisp bench run -t ch03:gemm
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class ChainWorkload(aisp.Workload):
    layers: int = 64
    n: int = 1024


def _workload() -> ChainWorkload:
    w = ChainWorkload()
    return ChainWorkload(flops=2.0 * w.layers * w.n**3, bytes=2.0 * w.layers * 3 * w.n * w.n,
                         items=w.layers, item_unit="GEMMs", precision="bf16",
                         ceiling_note="profiled (ncu, H200): each 1024^3 GEMM one 7.0 us nvjet kernel of 128 CTAs (one wave, 132 SMs): tensor pipe 32%, DRAM 13%, occupancy 14%",
                         requires=aisp.Requirements(cuda=True),
                         window="idle")


WORKLOAD = _workload()


class EagerChain(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("acts",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        opts = {"device": self.device, "dtype": torch.bfloat16}
        self.x = torch.randn(w.n, w.n, generator=gen, device=self.device).to(torch.bfloat16)
        self.weights = torch.randn(w.layers, w.n, w.n, generator=gen, device=self.device).div_(w.n**0.5).to(
            torch.bfloat16)
        self.acts = [torch.empty(w.n, w.n, **opts) for _ in range(2)]

    def chain(self) -> torch.Tensor:
        h = self.x
        for i in range(self.workload.layers):
            out = self.acts[i % 2]
            torch.mm(h, self.weights[i], out=out)
            h = out
        return h

    def run(self) -> torch.Tensor:
        return self.chain()


def get_benchmark() -> aisp.Benchmark:
    return EagerChain()


if __name__ == "__main__":
    aisp.main(get_benchmark)
