"""Optimized gradient all-reduce in bf16 (2 GPUs): the same gradients, half the bytes on NVLink.

Baseline (baseline_gradient_compression_multigpu.py): 256 MB of fp32 gradients all-reduced as fp32.
Optimized: cast to bf16 while copying into the reduce buffer (128 MB), all-reduce in bf16 (each partial
sum rounded to bf16), cast back to fp32: half the NVLink bytes for one
extra elementwise pass over HBM (~0.1 ms at 4 TB/s against ~0.35 ms saved on the link).
Accuracy: each value is rounded to bf16 twice (before and after the sum), relative error <= 2^-8
per value; averaged gradients differ from the fp32 ones by ~2e-3 relative L2 (measured on the CPU
test; the harness reports it per run as rel_l2_err). Frameworks ship this as a DDP comm hook
(``bf16_compress_hook``); at two ranks no error feedback is needed, at many ranks the bf16
partial sums lose more and fp32 accumulation (or error feedback) matters.
Expect (measured, 2 x H200, 2026-11-26): 1.051 -> 0.7908 ms, 1.32x [1.30, 1.35], below the 1.6-1.9x
estimated (half the bytes did not halve the time; not profiled).
Run: aisp bench run -t ch04:gradient_compression_multigpu
"""

from __future__ import annotations

import torch
from baseline_gradient_compression_multigpu import Fp32AllReduce
from ch04_common import all_reduce_mean_

import aisp


class Bf16AllReduce(Fp32AllReduce):
    scratch = ("out", "wire")

    def prepare(self) -> None:
        self.wire = torch.empty_like(self.grads, dtype=torch.bfloat16)

    def run(self) -> torch.Tensor:
        self.wire.copy_(self.grads)
        all_reduce_mean_(self.wire)
        return self.out.copy_(self.wire)


def get_benchmark() -> aisp.Benchmark:
    return Bf16AllReduce()


if __name__ == "__main__":
    aisp.main(get_benchmark)
