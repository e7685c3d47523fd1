"""Baseline batch size: an MLP pushes 8,192 samples through in steps of 32 rows.

Baseline: 256 steps of 32 rows; each step launches a GEMM, a ReLU and a GEMM that are too small
to fill the GPU, so launch overhead and idle SMs dominate (the seed's "87 MFLOP/s" story).
Optimized (optimized_batch_size.py): the same samples and weights in steps of 256 rows: 8x fewer
launches, each GEMM 8x larger and far more efficient. Same FLOPs, same outputs.
Expect: about 5-8x on an H100/H200 (launch-bound), 1.5-3x on a CPU.
Run: python ch01/baseline_batch_size.py  |  aisp bench run -t ch01:batch_size
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class MLPWorkload(aisp.Workload):
    samples: int = 8192
    d_in: int = 512
    hidden: int = 1024
    d_out: int = 512
    baseline_rows: int = 32
    optimized_rows: int = 256


def _mlp_workload() -> MLPWorkload:
    shape = MLPWorkload()
    macs = shape.samples * (shape.d_in * shape.hidden + shape.hidden * shape.d_out)
    weights = shape.d_in * shape.hidden + shape.hidden * shape.d_out
    io = shape.samples * (shape.d_in + shape.d_out)
    return MLPWorkload(flops=2.0 * macs, bytes=4.0 * (weights + io), items=shape.samples,
                       item_unit="samples", precision="fp32",
                       ceiling_note="profiled (torch profiler, H200): 0.88 ms of kernels a call (64 FFMA GEMMs, 64x64 tiles + split-K) in a 3.86 ms window under the profiler: busy 24%",
                       window="idle")


WORKLOAD = _mlp_workload()


class BatchedMLP(aisp.Benchmark):
    """Runs all samples through the MLP ``rows`` at a time."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    rows = WORKLOAD.baseline_rows

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dev = self.device
        self.x = torch.randn(w.samples, w.d_in, device=dev, generator=gen)
        self.w1 = torch.randn(w.d_in, w.hidden, device=dev, generator=gen) / w.d_in**0.5
        self.w2 = torch.randn(w.hidden, w.d_out, device=dev, generator=gen) / w.hidden**0.5
        self.out = torch.empty(w.samples, w.d_out, device=dev)

    def run(self) -> torch.Tensor:
        for start in range(0, self.workload.samples, self.rows):
            chunk = self.x[start:start + self.rows]
            self.out[start:start + self.rows] = torch.relu(chunk @ self.w1) @ self.w2
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return BatchedMLP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
